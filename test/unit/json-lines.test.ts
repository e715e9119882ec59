import { PassThrough } from 'node:stream';
import test from 'ava';
import { eachJsonLine } from '../../src/runtime/docker/json-lines.js';

test('values split across chunks arrive whole; blank and broken lines are skipped', (t) => {
  const stream = new PassThrough();
  const seen: unknown[] = [];
  eachJsonLine(stream, (value) => seen.push(value));
  stream.write('{"a":1}\n{"b":');
  stream.write('2}\n\n{not json}\n[3]\r\n');
  t.deepEqual(seen, [{ a: 1 }, { b: 2 }, [3]]);
});
