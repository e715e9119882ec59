import test from 'ava';
import { streamMessages } from '../../clients/typescript/src/sse.js';

// The client's own event-stream parser (it has no dependency), against the HTML standard's rules, the body cut
// at every byte: what a network may do to it.
const STREAM = ': ping\r\nevent: log\r\ndata: {"line":"a"}\r\nid: 7\r\n\r\ndata: one\ndata: two\n\n:comment\rdata:no space\r\r\nevent: ignored\n\ndata: last\n\n';

async function parse(chunks: string[]): Promise<{ messages: unknown[]; comments: number }> {
  const bytes = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(bytes.encode(chunk));
      controller.close();
    },
  });
  let comments = 0;
  const messages: unknown[] = [];
  for await (const message of streamMessages(body, () => (comments += 1))) messages.push(message);
  return { messages, comments };
}

test('events, ids, joined data lines, comments and every line ending, whole or cut anywhere', async (t) => {
  const expected = [
    { event: 'log', data: '{"line":"a"}', id: '7' },
    { event: undefined, data: 'one\ntwo', id: '7' },
    { event: undefined, data: 'no space', id: '7' },
    { event: undefined, data: 'last', id: '7' },
  ];
  const whole = await parse([STREAM]);
  t.deepEqual(whole, { messages: expected, comments: 2 });
  for (let cut = 1; cut < STREAM.length; cut += 1) {
    t.deepEqual(await parse([STREAM.slice(0, cut), STREAM.slice(cut)]), whole, `cut at ${cut}`);
  }
  t.deepEqual(await parse([...STREAM]), whole, 'a character at a time');
});
