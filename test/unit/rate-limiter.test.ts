import test from 'ava';
import { TooManyRequests } from '../../src/errors.js';
import { RateLimiter } from '../../src/lifecycle/rate-limiter.js';

test('a sliding window: the limit per key, and room again as old operations leave the window', (t) => {
  let now = 0;
  const limiter = new RateLimiter(2, 10_000, () => now);
  limiter.take('a');
  now = 4_000;
  limiter.take('a');
  limiter.take('b');
  const refused = t.throws(() => limiter.take('a'), { instanceOf: TooManyRequests });
  t.is(refused.retryAfterS, 6);
  now = 10_001;
  t.notThrows(() => limiter.take('a'));
  t.throws(() => limiter.take('a'), { instanceOf: TooManyRequests });
});
