import test from 'ava';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readLogFile } from '../../src/runtime/docker/docker-log-file.js';
import { MAX_LOG_BYTES } from '../../src/runtime/log-tail.js';

const dir = mkdtempSync(join(tmpdir(), 'log-file-'));
let files = 0;

/** A json-file log as the engine writes it: one entry a line. */
function logFile(entries: Array<string | [text: string, stream: 'stdout' | 'stderr']>, tail = ''): string {
  const path = join(dir, `${++files}-json.log`);
  const lines = entries.map((entry) => {
    const [text, stream] = typeof entry === 'string' ? [entry, 'stdout'] : entry;
    return `${JSON.stringify({ log: text, stream, time: '2026-11-28T13:41:47.150157888Z' })}\n`;
  });
  writeFileSync(path, lines.join('') + tail);
  return path;
}

const numbered = (count: number, from = 1): string[] => Array.from({ length: count }, (_, i) => `line ${i + from} of the bot\n`);

test('the last lines of the file, both outputs in the order written', async (t) => {
  const path = logFile([...numbered(150), ['an error\n', 'stderr'], 'the end\n']);
  t.is(await readLogFile(path, false, 3), 'line 150 of the bot\nan error\nthe end\n');
  t.is(await readLogFile(path, false, 100), [...numbered(98, 53), 'an error\n', 'the end\n'].join(''));
  t.is(await readLogFile(path, false, 10_000), [...numbered(150), 'an error\n', 'the end\n'].join(''));
});

test('entries across many blocks of the file, and a line the engine split into entries, whole', async (t) => {
  // 16 KiB entries make a line of 40,000 bytes three entries; thousands of lines make the file several 64 KiB blocks.
  const long = 'x'.repeat(40_000);
  const path = logFile([...numbered(3000), long.slice(0, 16_384), long.slice(16_384, 32_768), `${long.slice(32_768)}\n`, ...numbered(2000, 3001)]);
  t.is(await readLogFile(path, false, 2001), [`${long}\n`, ...numbered(2000, 3001)].join(''));
  t.is(await readLogFile(path, false, 4000), [...numbered(1999, 1002), `${long}\n`, ...numbered(2000, 3001)].join(''));
});

test('an entry the engine is still writing is left out', async (t) => {
  const path = logFile(numbered(5), '{"log":"half writ');
  t.is(await readLogFile(path, false, 2), numbered(2, 4).join(''));
  // Torn across a whole block: nothing of it, and the entries before it still whole.
  const longTorn = logFile(numbered(5), `{"log":"${'y'.repeat(100_000)}`);
  t.is(await readLogFile(longTorn, false, 2), numbered(2, 4).join(''));
});

test('a terminal: its CRLF ends become LF; text with no end, as written', async (t) => {
  t.is(await readLogFile(logFile(['one\r\n', 'two\r\n', 'prompt> ']), true, 2), 'two\nprompt> ');
});

test('the engine answers what the file cannot alone', async (t) => {
  t.is(await readLogFile(join(dir, 'container.log'), false, 5), undefined, 'not a json-file log');
  t.is(await readLogFile(join(dir, 'missing-json.log'), false, 5), undefined, 'no such file');
  t.is(await readLogFile(logFile(['a\n'], 'not an entry\n'), false, 5), undefined, 'a line that is not an entry');
  const rotated = logFile(numbered(3));
  writeFileSync(`${rotated}.1`, '');
  t.is(await readLogFile(rotated, false, 5), undefined, 'older lines in a rotated file');
  t.is(await readLogFile(rotated, false, 2), numbered(2, 2).join(''), 'a rotated log whose last file holds the lines');
  if (process.getuid?.() !== 0) {
    const closed = logFile(numbered(3));
    chmodSync(closed, 0);
    t.is(await readLogFile(closed, false, 2), undefined, 'a file the agent may not read');
  }
});

test('an answer holds what docs/api.md §2 allows: the newest whole lines, however long the file', async (t) => {
  const line = `${'z'.repeat(1023)}\n`;
  const path = logFile(Array.from({ length: (MAX_LOG_BYTES / 1024) * 2 }, () => line));
  const text = await readLogFile(path, false, 10_000);
  t.truthy(text);
  t.true(Buffer.byteLength(text ?? '') <= MAX_LOG_BYTES);
  t.true((text ?? '').startsWith('z') && (text ?? '').endsWith('\n'));
  t.is((text ?? '').length % 1024, 0, 'whole lines only');
  // Control bytes take six times their size once in JSON, in the file and in the answer alike.
  const controls = await readLogFile(logFile(Array.from({ length: 300 }, () => `${'\u0001'.repeat(16_383)}\n`)), false, 10_000);
  t.truthy(controls);
  t.true(Buffer.byteLength(JSON.stringify(controls)) <= MAX_LOG_BYTES + 2);
  // More of the file to go through than the bound (entries of no text, each with the attributes a log option adds): the engine's read instead.
  const attributes = join(dir, 'attributes-json.log');
  const entry = `${JSON.stringify({ log: '', stream: 'stdout', attrs: { tag: 'a'.repeat(100_000) }, time: '2026-11-28T13:41:47Z' })}\n`;
  writeFileSync(attributes, `${JSON.stringify({ log: 'first\n', stream: 'stdout', time: '2026-11-28T13:41:47Z' })}\n${entry.repeat(340)}`);
  t.is(await readLogFile(attributes, false, 1), undefined);
});

test('a read of many blocks lets other work run between them; a read of one block answers at once', async (t) => {
  const many = logFile(numbered(20_000));
  const order: string[] = [];
  setImmediate(() => order.push('other work'));
  order.push(((await readLogFile(many, false, 10_000)) ?? '').startsWith('line 10001 of') ? 'read' : 'wrong text');
  t.deepEqual(order, ['other work', 'read']);
  const one = logFile(numbered(100));
  order.length = 0;
  setImmediate(() => order.push('other work'));
  order.push(((await readLogFile(one, false, 3)) ?? '').startsWith('line 98 of') ? 'read' : 'wrong text');
  t.deepEqual(order, ['read'], 'the other work still waits: the read took no turn of the loop');
});
