import test from 'ava';
import { STREAM_LINE_MAX, StreamLineTooLong, streamMessages } from '../../clients/typescript/src/sse.js';

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

test('a line, or one message, longer than STREAM_LINE_MAX ends the stream with an error, held no further', async (t) => {
  const body = (chunks: Iterable<string>) => {
    const bytes = new TextEncoder();
    const iterator = chunks[Symbol.iterator]();
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = iterator.next();
        if (next.done) controller.close();
        else {
          pulled += next.value.length;
          controller.enqueue(bytes.encode(next.value));
        }
      },
    });
    return { stream, pulled: () => pulled };
  };
  // A line that never ends: 64 KiB pieces for ever.
  function* endless(prefix: string, piece: string) {
    yield prefix;
    for (;;) yield piece;
  }
  const line = body(endless('data: ', 'x'.repeat(65_536)));
  await t.throwsAsync(async () => {
    for await (const message of streamMessages(line.stream)) void message;
  }, { instanceOf: StreamLineTooLong, message: `the event stream sent a line longer than ${STREAM_LINE_MAX} characters` });
  t.true(line.pulled() < STREAM_LINE_MAX + 2 * 65_536, `${line.pulled()} characters read`);
  // Short lines that make one message without end.
  const message = body(endless('', `data: ${'y'.repeat(1_000)}\n`));
  await t.throwsAsync(async () => {
    for await (const each of streamMessages(message.stream)) void each;
  }, { instanceOf: StreamLineTooLong, message: /a message longer than/ });
  t.deepEqual((await parse([`data: ${'z'.repeat(STREAM_LINE_MAX - 10)}\n\n`])).messages.length, 1, 'a long line within the bound is taken');
});
