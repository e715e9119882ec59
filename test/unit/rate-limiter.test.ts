import test from 'ava';
import { TooManyRequests } from '../../src/errors.js';
import { RateLimiter } from '../../src/lifecycle/rate-limiter.js';

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
