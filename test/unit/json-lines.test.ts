import { PassThrough } from 'node:stream';
import test from 'ava';
import { eachJsonLine } from '../../src/runtime/docker/json-lines.js';

test('values split across chunks arrive whole; blank and broken lines are skipped', (t) => {
  const stream = new PassThrough();
  const seen: unknown[] = [];
  eachJsonLine(stream, (value) => seen.push(value), () => t.fail());
  stream.write('{"a":1}\n{"b":');
  stream.write('2}\n\n{not json}\n[3]\r\n');
  t.deepEqual(seen, [{ a: 1 }, { b: 2 }, [3]]);
});

test('a character split across chunks arrives whole', (t) => {
  const stream = new PassThrough();
  const seen: unknown[] = [];
  eachJsonLine(stream, (value) => seen.push(value), () => t.fail());
  const bytes = Buffer.from('{"name":"€"}\n');
  stream.write(bytes.subarray(0, 10));
  stream.write(bytes.subarray(10));
  t.deepEqual(seen, [{ name: '€' }]);
});

test('a handler that throws, and a line too long, go to onError; the stream goes on', (t) => {
  const stream = new PassThrough();
  const seen: unknown[] = [];
  const errors: string[] = [];
  eachJsonLine<{ n: number } | null>(
    stream,
    (value) => seen.push((value as { n: number }).n),
    (err) => errors.push((err as Error).message),
  );
  t.notThrows(() => stream.write('null\n{"n":1}\n'));
  t.notThrows(() => stream.write('x'.repeat(2 * 1024 * 1024)));
  stream.write('\n{"n":2}\n');
  t.deepEqual(seen, [1, 2]);
  t.is(errors.length, 2);
  t.regex(errors[0] ?? '', /null/);
  t.regex(errors[1] ?? '', /longer than/);
});
