import test from 'ava';
import { TooManyRequests } from '../../src/errors.js';
import { ReadLimiter } from '../../src/http/read-limiter.js';

test('a bot may burst twice its rate, then reads at its rate; other bots are not affected', (t) => {
  let now = 0;
  const limiter = new ReadLimiter(20, () => now);
  for (let i = 0; i < 40; i += 1) limiter.take('bot_1_1_a');
  const refused = t.throws(() => limiter.take('bot_1_1_a'), { instanceOf: TooManyRequests });
  t.is(refused.retryAfterS, 1);
  t.regex(refused.message, /too many reads/);
  t.notThrows(() => limiter.take('bot_2_2_b'));
  now = 100; // 0.1 s refills two reads
  limiter.take('bot_1_1_a');
  limiter.take('bot_1_1_a');
  t.throws(() => limiter.take('bot_1_1_a'), { instanceOf: TooManyRequests });
});

test('Retry-After covers the wait for the next read at a slow rate', (t) => {
  const limiter = new ReadLimiter(1, () => 0);
  limiter.take('bot_1_1_a');
  limiter.take('bot_1_1_a');
  t.is(t.throws(() => limiter.take('bot_1_1_a'), { instanceOf: TooManyRequests }).retryAfterS, 1);
});
