import test from 'ava';
import { KeyedQueue, WaitedTooLong } from '../../src/lifecycle/keyed-queue.js';
import { gate } from '../helpers/gate.js';


test('tasks of one key run one at a time, in order; other keys do not wait', async (t) => {
  const queue = new KeyedQueue();
  const order: string[] = [];
  const first = gate();
  const a1 = queue.run('a', 'one', async () => {
    await first.promise;
    order.push('a1');
  });
  const a2 = queue.run('a', 'two', async () => void order.push('a2'));
  await queue.run('b', 'other', async () => void order.push('b1'));
  first.open();
  await Promise.all([a1, a2]);
  t.deepEqual(order, ['b1', 'a1', 'a2']);
});

test('a task that waited its bound is dropped, naming the task under way; the next still waits its turn', async (t) => {
  const queue = new KeyedQueue();
  const held = gate();
  const ran: string[] = [];
  const restart = queue.run('a', 'restart', async () => {
    await held.promise;
    ran.push('restart');
  });
  const dropped = queue.run('a', 'stop', async () => void ran.push('stop'), 20);
  const error = await t.throwsAsync(dropped, { instanceOf: WaitedTooLong });
  t.is(error?.running, 'restart');
  const start = queue.run('a', 'start', async () => void ran.push('start'));
  held.open();
  await Promise.all([restart, start]);
  t.deepEqual(ran, ['restart', 'start']);
  await queue.drain();
});
