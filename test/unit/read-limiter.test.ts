import test from 'ava';
import { TooManyRequests } from '../../src/errors.js';
import { logReadCost, ReadLimiter } from '../../src/http/read-limiter.js';

test('a bot may burst twice its rate, then reads at its rate; other bots are not affected', (t) => {
  let now = 0;
  const limiter = new ReadLimiter(20, () => now);
  for (let i = 0; i < 40; i += 1) limiter.count('bot_1_1_a');
  const refused = t.throws(() => limiter.count('bot_1_1_a'), { instanceOf: TooManyRequests });
  t.is(refused.retryAfterS, 1);
  t.regex(refused.message, /too many reads/);
  t.notThrows(() => limiter.count('bot_2_2_b'));
  now = 100; // 0.1 s refills two reads
  limiter.count('bot_1_1_a');
  limiter.count('bot_1_1_a');
  t.throws(() => limiter.count('bot_1_1_a'), { instanceOf: TooManyRequests });
});

test('Retry-After covers the wait for the next read at a slow rate', (t) => {
  const limiter = new ReadLimiter(1, () => 0);
  limiter.count('bot_1_1_a');
  limiter.count('bot_1_1_a');
  t.is(t.throws(() => limiter.count('bot_1_1_a'), { instanceOf: TooManyRequests }).retryAfterS, 1);
});

test('a refused read is answered only once its Retry-After has passed, at most a second', async (t) => {
  const limiter = new ReadLimiter(1);
  await limiter.take('bot_1_1_a');
  await limiter.take('bot_1_1_a');
  const started = Date.now();
  await t.throwsAsync(limiter.take('bot_1_1_a'), { instanceOf: TooManyRequests });
  t.true(Date.now() - started >= 990, `held ${Date.now() - started} ms`);
});

test('a logs read counts one read for each started 1,000 lines', (t) => {
  t.deepEqual([0, 1, 100, 1_000, 1_001, 10_000].map(logReadCost), [1, 1, 1, 1, 2, 10]);
  let now = 0;
  const limiter = new ReadLimiter(20, () => now);
  for (let i = 0; i < 4; i += 1) limiter.count('bot_1_1_a', 10);
  const refused = t.throws(() => limiter.count('bot_1_1_a', 10), { instanceOf: TooManyRequests });
  t.is(refused.retryAfterS, 1);
  now = 500;
  t.notThrows(() => limiter.count('bot_1_1_a', 10));
});
