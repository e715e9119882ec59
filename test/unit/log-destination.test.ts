import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import test from 'ava';

/**
 * A process that writes `count` numbered lines through BatchedLines (to its stdout) and then, as
 * `then` says, stays (until killed) or exits at once; its lines as they arrive, each with when.
 */
function writer(options: { count: number; batchChars: number; flushMs: number; then: 'stay' | 'exit' }) {
  const script = `
    import { BatchedLines } from './src/log-destination.ts';
    const lines = new BatchedLines(1, ${options.batchChars}, ${options.flushMs});
    for (let i = 1; i <= ${options.count}; i++) lines.write(i + '\\n');
    ${options.then === 'exit' ? 'process.exit(0);' : 'setInterval(() => {}, 60_000);'}`;
  const child = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const started = Date.now();
  const arrived: Array<{ line: string; afterMs: number }> = [];
  const reading = (async () => {
    for await (const line of createInterface({ input: child.stdout })) arrived.push({ line, afterMs: Date.now() - started });
  })();
  return { child, arrived, reading, exited };
}

const numbers = (count: number): string[] => Array.from({ length: count }, (_, i) => String(i + 1));

async function until(check: () => boolean, ms: number): Promise<void> {
  for (const deadline = Date.now() + ms; !check() && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
}

test('lines that wait at exit are written, all and in order', async (t) => {
  // A batch far larger than what is written, a flush far later than the exit: only the exit writes them.
  const { arrived, reading, exited } = writer({ count: 5000, batchChars: 1_000_000, flushMs: 3_600_000, then: 'exit' });
  await reading;
  t.is(await exited, 0);
  t.deepEqual(
    arrived.map((a) => a.line),
    numbers(5000),
  );
});

test('a full batch goes out at once; a short one within its flush time, while the process runs on', async (t) => {
  const full = writer({ count: 3000, batchChars: 1024, flushMs: 3_600_000, then: 'stay' });
  t.teardown(() => full.child.kill('SIGKILL'));
  // 3000 lines are 13,893 characters: batches of 1 KiB or a little more go out, 2886 lines; the last 570 characters wait for the hour.
  await until(() => full.arrived.length >= 2886, 10_000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.is(full.arrived.length, 2886, 'the full batches, no more');
  t.deepEqual(
    full.arrived.map((a) => a.line),
    numbers(2886),
  );

  const short = writer({ count: 3, batchChars: 1_000_000, flushMs: 200, then: 'stay' });
  t.teardown(() => short.child.kill('SIGKILL'));
  await until(() => short.arrived.length >= 3, 10_000);
  t.deepEqual(
    short.arrived.map((a) => a.line),
    ['1', '2', '3'],
  );
  t.is(short.child.exitCode, null, 'the writer still runs');
});

test('secrets never reach the log: as written, escaped in JSON, percent-encoded; short ones are left alone', async (t) => {
  const script = `
    import { pino } from 'pino';
    import { BatchedLines } from './src/log-destination.ts';
    const logger = pino({}, new BatchedLines(1, 1_000_000, 3_600_000, ['pa/ss"w#rd', 'admin-token-123', 'ab', undefined]));
    logger.warn({ err: new Error('connect to postgres://u:pa%2Fss%22w%23rd@db failed') }, 'token admin-token-123 and pa/ss"w#rd; ab stays');
    process.exit(0);`;
  const child = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  for await (const chunk of child.stdout) text += String(chunk);
  t.notRegex(text, /pa\/ss|pa%2Fss|admin-token-123/);
  t.regex(text, /token \*\*\* and \*\*\*; ab stays/);
  t.regex(text, /postgres:\/\/u:\*\*\*@db/);
});
