import test from 'ava';
import { TooManyRequests } from '../../src/errors.js';
import { SearchSlots } from '../../src/log-history/search-slots.js';

// The bound on log history searches at once (docs/api.md §21): a search held open keeps its slot.
const held = () => {
  let release = () => {};
  const done = new Promise<void>((resolve) => (release = resolve));
  return { done, release: () => release() };
};

test('at most the total run at once; the next is refused with 429 and a retry after a second, and runs once a slot is free', async (t) => {
  const slots = new SearchSlots(2);
  const first = held();
  const second = held();
  const running = [slots.run(undefined, () => first.done), slots.run(undefined, () => second.done)];
  const refused = await t.throwsAsync(slots.run(undefined, async () => 'third'), { instanceOf: TooManyRequests });
  t.is(refused?.retryAfterS, 1);
  first.release();
  await running[0];
  t.is(await slots.run(undefined, async () => 'third'), 'third');
  second.release();
  await Promise.all(running);
});

test('a bot has one search at once; another bot, and the platform, are not held by it; a failed search frees its slot', async (t) => {
  const slots = new SearchSlots(4);
  const own = held();
  const running = slots.run('bot_1_1_a', () => own.done);
  await t.throwsAsync(slots.run('bot_1_1_a', async () => 'again'), { instanceOf: TooManyRequests, message: /bot bot_1_1_a has a log history search under way/ });
  t.is(await slots.run('bot_2_1_b', async () => 'other'), 'other');
  t.is(await slots.run(undefined, async () => 'platform'), 'platform');
  own.release();
  await running;
  await t.throwsAsync(slots.run('bot_1_1_a', async () => Promise.reject(new Error('broken'))), { message: 'broken' });
  t.is(await slots.run('bot_1_1_a', async () => 'freed'), 'freed');
});
