import { writeSync } from 'node:fs';
import { BotHistory } from '../../src/history/bot-history.js';
import type { AgentStore } from '../../src/history/open-store.js';
import { SharedState } from '../../src/shared/shared-state.js';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';

// A child process of test/crash/spool-sigkill.test.ts: the real BotHistory over the real SQLite store in `dir`, its
// spool in `dir`, with the store made away and back at random moments. `write` mode keeps recording operations and
// prints each one's result once it is kept (in the store or the spool) until it is killed, now and then killing
// itself right after a commit, before the spool counts it (a write the full spool refused is printed as `dropped`);
// `drain` mode writes what waits and says so.
const [dir = '', round = '0', mode = 'write'] = process.argv.slice(2);

// The parent's end of the pipe is non-blocking: when it reads late, a write finds it full (EAGAIN) and is tried again.
// A line this short is written whole or not at all (POSIX: at most PIPE_BUF bytes are atomic).
async function printLine(line: string): Promise<void> {
  for (;;) {
    try {
      writeSync(1, `${line}\n`);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
}

class Away extends Error {}
let away = false;
let replaying = false;
const real = new SqliteHistoryStore(dir);
const flaky = new Proxy(real, {
  get(target, property) {
    if (property === 'isAway') return (err: unknown) => err instanceof Away;
    if (property === 'reachable') return !away;
    const value: unknown = Reflect.get(target, property, target);
    if (typeof value !== 'function' || ['subscribe', 'close', 'opened'].includes(String(property))) {
      return typeof value === 'function' ? value.bind(target) : value;
    }
    return async (...args: unknown[]) => {
      if (away) throw new Away('away');
      const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      // The worst moment: the store has committed a write from the spool, the spool has not counted it yet.
      if (mode === 'write' && property === 'transaction' && replaying && Math.random() < 0.02) process.kill(process.pid, 'SIGKILL');
      return result;
    };
  },
}) as AgentStore;

const history = new BotHistory(flaky, new SharedState(flaky), () => Promise.reject(new Error('no bots here')), {
  spoolDir: dir,
  deliver: true,
  spoolRetryMs: 20,
  report: () => undefined,
});
writeSync(2, `damaged ${history.spool.damaged}\n`);

if (mode === 'drain') {
  while (history.spool.size > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  await history.close();
  await real.close();
  await printLine('drained');
} else {
  const flip = (): void => {
    away = Math.random() < 0.5;
    setTimeout(flip, 5 + Math.random() * 40);
  };
  flip();
  for (let i = 0; ; i += 1) {
    replaying = history.spool.size > 0;
    const droppedBefore = history.spool.dropped;
    await history.operationEnded('bot_1_1_a', 'restart', `${round}-${i}`, 'platform');
    await printLine(history.spool.dropped > droppedBefore ? `dropped ${round}-${i}` : `${round}-${i}`);
    // The store's calls resolve without a pause: timers (the store's coming and going, the spool's retries) need one.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
