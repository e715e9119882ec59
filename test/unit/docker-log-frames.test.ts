import test from 'ava';
import { demuxed, DockerLogDemuxer } from '../../src/runtime/docker/docker-log-frames.js';
import type { OutputStream } from '../../src/runtime/docker/docker-log-frames.js';

function frame(type: number, payload: string): Buffer {
  const header = Buffer.alloc(8);
  header[0] = type;
  header.writeUInt32BE(Buffer.byteLength(payload), 4);
  return Buffer.concat([header, Buffer.from(payload)]);
}

test('frames become their payloads, stdout and stderr interleaved in order', (t) => {
  const raw = Buffer.concat([frame(1, 'out 1\n'), frame(2, 'err 1\n'), frame(1, 'out 2\n')]);
  t.is(demuxed(raw).toString(), 'out 1\nerr 1\nout 2\n');
  const seen: Array<[OutputStream, string]> = [];
  new DockerLogDemuxer((stream, bytes) => seen.push([stream, bytes.toString()])).push(raw);
  t.deepEqual(seen, [
    ['stdout', 'out 1\n'],
    ['stderr', 'err 1\n'],
    ['stdout', 'out 2\n'],
  ]);
});

test('a million frames cost no recursion (docker-modem overflowed the stack at a few thousand)', (t) => {
  const one = frame(1, 'x\n');
  const raw = Buffer.concat(Array.from({ length: 1_000_000 }, () => one));
  const demuxer = new DockerLogDemuxer(() => undefined);
  demuxer.push(raw);
  t.is(demuxer.frames, 1_000_000);
});

test('headers and payloads split across chunks at every byte arrive whole', (t) => {
  const raw = Buffer.concat([frame(1, 'hello\n'), frame(2, ''), frame(2, 'world\n')]);
  for (let size = 1; size <= raw.length; size += 1) {
    let out = '';
    const demuxer = new DockerLogDemuxer((_stream, bytes) => (out += bytes.toString()));
    for (let at = 0; at < raw.length; at += size) demuxer.push(raw.subarray(at, at + size));
    t.is(out, 'hello\nworld\n', `chunks of ${size}`);
    t.is(demuxer.frames, 3);
  }
});

test('bytes that cannot be a header pass through as stdout', (t) => {
  t.is(demuxed(Buffer.from('plain text, not framed\n')).toString(), 'plain text, not framed\n');
  t.is(demuxed(Buffer.concat([frame(1, 'a\n'), Buffer.from('garbage!')])).toString(), 'a\ngarbage!');
});
