import test from 'ava';
import { fitJson, jsonBytes } from '../../src/json-text.js';
import { countLines, lastLines, MAX_LOG_BYTES, TailBuffer } from '../../src/runtime/log-tail.js';

const text = (value: string) => Buffer.from(value);

test('the last N lines, whole, with or without a final newline', (t) => {
  t.is(lastLines(text('a\nb\nc\n'), 2), 'b\nc\n');
  t.is(lastLines(text('a\nb\nc'), 2), 'b\nc');
  t.is(lastLines(text('a\nb\nc\n'), 3), 'a\nb\nc\n');
  t.is(lastLines(text('a\nb\nc\n'), 10), 'a\nb\nc\n');
  t.is(lastLines(text('\n\n\n'), 2), '\n\n');
  t.is(lastLines(text(''), 5), '');
});

test('bytes that are not UTF-8 become U+FFFD; a terminal\'s CRLF becomes LF', (t) => {
  t.is(lastLines(Buffer.from([0x61, 0xff, 0xfe, 0x0a]), 1), 'a\ufffd\ufffd\n');
  t.is(lastLines(text('one\r\ntwo\r\n'), 1, { tty: true }), 'two\n');
  t.is(lastLines(text('keeps \r and \x1b[31m escapes\n'), 1), 'keeps \r and \x1b[31m escapes\n');
});

test('a cut text loses its partial first line, unless that line is all there is', (t) => {
  t.is(lastLines(text('tail of a line\nwhole\n'), 10, { cut: true }), 'whole\n');
  t.is(lastLines(text('end of one long line\n'), 10, { cut: true }), 'end of one long line\n');
  // A cut inside a character never leaves half of it behind.
  t.is(lastLines(Buffer.from([0x82, 0xac, 0x61, 0x0a]), 1, { cut: true }), 'a\n');
});

// The cap is on the answer: a newline takes two bytes in JSON (`\\n`), a control byte six.
test('past the byte cap, the newest whole lines that fit are kept', (t) => {
  t.is(lastLines(text('aaaa\nbbb\ncc\n'), 10, { maxBytes: 9 }), 'bbb\ncc\n');
  t.is(lastLines(text('aaaa\nbbb\ncc\n'), 10, { maxBytes: 8 }), 'cc\n');
  t.is(lastLines(text('aaaa\nbbb\ncc\n'), 10, { maxBytes: 4 }), 'cc\n');
});

test('a single line longer than the cap keeps its end, on a character boundary', (t) => {
  t.is(lastLines(text('0123456789\n'), 1, { maxBytes: 5 }), '789\n');
  t.is(lastLines(text('01234567'), 1, { maxBytes: 4 }), '4567');
  t.is(lastLines(text('xx€€\n'), 1, { maxBytes: 6 }), '€\n');
  t.is(fitJson('ab😀', 4), '😀');
  t.is(fitJson('ab😀', 3), '');
});

test('the cap counts the text as answered: replaced bytes take three each, control bytes six', (t) => {
  t.is(lastLines(Buffer.from([0xff, 0xff, 0x0a, 0x61, 0x0a]), 10, { maxBytes: 5 }), 'a\n');
  t.is(lastLines(text('\x01\x01\nab\n'), 10, { maxBytes: 17 }), 'ab\n');
  t.is(lastLines(text('\x01\x01\nab\n'), 10, { maxBytes: 18 }), '\x01\x01\nab\n');
});

test('jsonBytes is what JSON.stringify writes, in UTF-8, without the quotes', (t) => {
  for (const sample of ['', 'plain', '"\\', '\b\f\n\r\t\x00\x1f\x7f', 'é€😀', '\ud800 lone \udc00', '\ufffd'.repeat(3)]) {
    t.is(jsonBytes(sample), Buffer.byteLength(JSON.stringify(sample)) - 2, JSON.stringify(sample));
  }
});

test('the default cap is 4 MiB of the answer, whatever the bytes', (t) => {
  const line = `${'x'.repeat(1023)}\n`;
  const answer = lastLines(text(line.repeat(5000)), 10_000);
  t.true(Buffer.byteLength(JSON.stringify(answer)) - 2 <= MAX_LOG_BYTES);
  t.is(answer.length, Math.floor(MAX_LOG_BYTES / 1025) * 1024);
  t.true(answer.startsWith('x'));
  const control = lastLines(Buffer.alloc(MAX_LOG_BYTES, 1), 1);
  t.is(Buffer.byteLength(JSON.stringify(control)) - 2, MAX_LOG_BYTES - (MAX_LOG_BYTES % 6));
});

test('a tail buffer keeps only the newest bytes and says it cut', (t) => {
  const tail = new TailBuffer(10);
  for (let i = 0; i < 100; i += 1) tail.push(text(`${i % 10}`.repeat(3)));
  const bytes = tail.bytes();
  t.is(bytes.length, 10);
  t.is(bytes.toString(), '6777888999');
  t.true(tail.cut);
  const small = new TailBuffer(10);
  small.push(text('abc'));
  t.is(small.bytes().toString(), 'abc');
  t.false(small.cut);
});

test('countLines counts newline-ended lines and a last unended one', (t) => {
  t.is(countLines(text('')), 0);
  t.is(countLines(text('a')), 1);
  t.is(countLines(text('a\n')), 1);
  t.is(countLines(text('a\nb')), 2);
});
