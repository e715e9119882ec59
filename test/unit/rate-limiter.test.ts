import test from 'ava';
import { TooManyRequests } from '../../src/errors.js';
import { RateLimiter } from '../../src/lifecycle/rate-limiter.js';
import type { SharedWindow } from '../../src/shared/shared-state.js';

test('a sliding window: the limit per key, and room again as old operations leave the window', async (t) => {
  let now = 0;
  const limiter = new RateLimiter(2, 10_000, () => now);
  await limiter.take('a');
  now = 4_000;
  await limiter.take('a');
  await limiter.take('b');
  const refused = await t.throwsAsync(limiter.take('a'), { instanceOf: TooManyRequests });
  t.is(refused.retryAfterS, 6);
  now = 10_001;
  await t.notThrowsAsync(limiter.take('a'));
  await t.throwsAsync(limiter.take('a'), { instanceOf: TooManyRequests });
});

test("a bot's own operations and the platform's are counted apart", async (t) => {
  const limiter = new RateLimiter(1, 10_000, () => 0);
  await limiter.take('a', 'bot');
  await t.throwsAsync(limiter.take('a', 'bot'), { instanceOf: TooManyRequests });
  await t.notThrowsAsync(limiter.take('a', 'platform'));
});

/** A shared window over an array of let-through times, counting how often and how many at once it is asked. */
function countingWindow(answerAfterMs = 0) {
  const times = new Map<string, number[]>();
  const asked = { total: 0, atOnce: 0, most: 0 };
  const window: SharedWindow = async (key, limit, windowMs, nowMs) => {
    asked.total += 1;
    asked.atOnce += 1;
    asked.most = Math.max(asked.most, asked.atOnce);
    await new Promise((resolve) => setTimeout(resolve, answerAfterMs));
    asked.atOnce -= 1;
    const kept = (times.get(key) ?? []).filter((time) => time > nowMs - windowMs);
    times.set(key, kept);
    if (kept.length >= limit) return (kept[0] ?? nowMs) + windowMs - nowMs;
    kept.push(nowMs);
    return undefined;
  };
  return { window, asked };
}

test('with a shared window, calls past the limit are refused from memory: 500 at once ask the database once each key, one at a time', async (t) => {
  const { window, asked } = countingWindow(20);
  const limiter = new RateLimiter(3, 60_000, Date.now, { window, timeoutMs: 1_000, awayMs: 5_000 });
  const outcomes = await Promise.allSettled(Array.from({ length: 500 }, () => limiter.take('flooder', 'bot')));
  t.is(outcomes.filter((outcome) => outcome.status === 'fulfilled').length, 3);
  t.true(outcomes.filter((outcome) => outcome.status === 'rejected').every((outcome) => outcome.reason instanceof TooManyRequests));
  // Three let through, each asked once; this agent's own count then refuses the other 497 without a question.
  t.is(asked.total, 3);
  t.is(asked.most, 1);
  await t.throwsAsync(limiter.take('flooder', 'bot'), { instanceOf: TooManyRequests });
  t.is(asked.total, 3);
  // Another bot, and the platform on the same bot, still ask and are let through.
  await t.notThrowsAsync(limiter.take('flooder', 'platform'));
  await t.notThrowsAsync(limiter.take('quiet', 'bot'));
});

test("the shared window's refusal holds from memory only until its oldest operation leaves the window", async (t) => {
  let now = 0;
  const { window, asked } = countingWindow();
  const other = new RateLimiter(1, 10_000, () => now, { window, timeoutMs: 1_000, awayMs: 5_000 });
  const limiter = new RateLimiter(1, 10_000, () => now, { window, timeoutMs: 1_000, awayMs: 5_000 });
  await other.take('a');
  now = 4_000;
  t.is((await t.throwsAsync(limiter.take('a'), { instanceOf: TooManyRequests })).retryAfterS, 6);
  now = 9_999;
  await t.throwsAsync(limiter.take('a'), { instanceOf: TooManyRequests });
  t.is(asked.total, 2);
  now = 10_000;
  await t.notThrowsAsync(limiter.take('a'));
  t.is(asked.total, 3);
});

test('a shared window that fails or does not answer in time: counted in this agent alone, the database asked again later', async (t) => {
  let now = 0;
  let calls = 0;
  const reports: string[] = [];
  const hanging: SharedWindow = async () => {
    calls += 1;
    return new Promise<never>(() => undefined);
  };
  const limiter = new RateLimiter(2, 60_000, () => now, { window: hanging, timeoutMs: 50, awayMs: 5_000, report: (what) => reports.push(what) });
  await t.notThrowsAsync(limiter.take('a'));
  await t.notThrowsAsync(limiter.take('a'));
  await t.throwsAsync(limiter.take('a'), { instanceOf: TooManyRequests });
  t.is(calls, 1);
  t.is(reports.length, 1);
  now = 5_000;
  await t.throwsAsync(limiter.take('a'), { instanceOf: TooManyRequests });
  await t.notThrowsAsync(limiter.take('b'));
  t.is(calls, 2);
});
