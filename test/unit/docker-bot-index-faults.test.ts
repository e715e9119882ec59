import { PassThrough } from 'node:stream';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type Docker from 'dockerode';
import { DockerBotIndex } from '../../src/runtime/docker/docker-bot-index.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { eventually } from '../helpers/eventually.js';

// What a real engine never sends, so a stand-in event stream sends it: the
// index's handlers must not throw, whatever arrives, and a lost stream is
// reported once, not once a reconnect.
function engineWithEvents() {
  const streams: PassThrough[] = [];
  const asked: Array<{ since?: string }> = [];
  const docker = {
    getEvents: async (options: { since?: string }) => {
      asked.push(options);
      const stream = new PassThrough();
      streams.push(stream);
      return stream;
    },
    listContainers: async () => [],
    ping: async () => 'OK',
  } as unknown as Docker;
  return { docker, streams, asked };
}

/** An index over such a stream, live (answering) before the test goes on; its faults kept. */
async function liveIndex(t: ExecutionContext) {
  const { docker, streams, asked } = engineWithEvents();
  const faults: string[] = [];
  const index = new DockerBotIndex(docker, (what) => faults.push(what));
  t.teardown(() => index.close());
  t.true(await eventually(() => index.byIndex('address', '10.0.0.1') !== undefined), 'the index never came up');
  return { index, streams, faults, asked };
}

test('events no handler expects are reported and skipped; the index stays live', async (t) => {
  const { index, streams, faults } = await liveIndex(t);
  for (const event of ['null', '1', '"text"', '{"Type":"container","Actor":null}', '{"Type":"network","Actor":{"Attributes":null}}']) {
    t.notThrows(() => streams[0]?.write(`${event}\n`), event);
  }
  t.true(await eventually(() => faults.length > 0));
  t.true(faults.every((what) => /could not handle/.test(what)), faults.join('; '));
  t.deepEqual(index.byIndex('address', '10.0.0.1'), [], 'the index went dark');
});

test('a stream that ends is reported once and reopened', async (t) => {
  const { index, streams, faults } = await liveIndex(t);
  streams[0]?.end();
  streams[0]?.resume();
  t.true(await eventually(() => streams.length === 2 && index.byIndex('address', '10.0.0.1') !== undefined, 5_000), 'not reopened');
  t.is(faults.length, 1, faults.join('; '));
  t.regex(faults[0] ?? '', /lost the engine event stream/);
});

test('a run watcher that comes after a caller opened the stream still gets every event since its start: the stream is opened again from then', async (t) => {
  const { index, streams, faults, asked } = await liveIndex(t);
  t.is(asked[0]?.since, undefined, 'opened for a caller, before any run watcher');
  const heard: string[] = [];
  index.watch((event) => heard.push(event.Action ?? ''), new Date(1_700_000_000_123));
  t.true(await eventually(() => asked.length === 2 && index.byIndex('address', '10.0.0.1') !== undefined), 'not opened again');
  t.regex(asked[1]?.since ?? '', /^1700000000\.123/);
  t.true(streams[0]?.destroyed, 'the first stream was let go');
  streams[1]?.write('{"Type":"container","Action":"die","Actor":{"ID":"abc","Attributes":{}}}\n');
  t.true(await eventually(() => heard.includes('die')));
  t.deepEqual(faults, [], 'opening it again is no fault');
});

test("a container's death is kept while the container exists; one removed while the stream was down goes with the next listing", async (t) => {
  const { index, streams } = await liveIndex(t);
  const die = { Type: 'container', Action: 'die', Actor: { ID: 'c1', Attributes: { [BOT_LABEL]: 'bot_1_1_gone' } }, timeNano: 1_700_000_000_000_000_000 };
  streams[0]?.write(`${JSON.stringify(die)}\n`);
  t.true(await eventually(() => index.diedAt('c1') === 1_700_000_000_000));
  // Its destroy is never heard: the stream ends, and the listing on reopening has no such container.
  streams[0]?.end();
  streams[0]?.resume();
  t.true(await eventually(() => streams.length === 2 && index.byIndex('address', '10.0.0.1') !== undefined, 5_000), 'not reopened');
  t.is(index.diedAt('c1'), undefined);
  t.is(index.deathsKept, 0);
});
