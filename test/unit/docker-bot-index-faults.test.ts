import { PassThrough } from 'node:stream';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type Docker from 'dockerode';
import { DockerBotIndex } from '../../src/runtime/docker/docker-bot-index.js';
import { eventually } from '../helpers/eventually.js';

// What a real engine never sends, so a stand-in event stream sends it: the
// index's handlers must not throw, whatever arrives, and a lost stream is
// reported once, not once a reconnect.
function engineWithEvents() {
  const streams: PassThrough[] = [];
  const docker = {
    getEvents: async () => {
      const stream = new PassThrough();
      streams.push(stream);
      return stream;
    },
    listContainers: async () => [],
    ping: async () => 'OK',
  } as unknown as Docker;
  return { docker, streams };
}

/** An index over such a stream, live (answering) before the test goes on; its faults kept. */
async function liveIndex(t: ExecutionContext) {
  const { docker, streams } = engineWithEvents();
  const faults: string[] = [];
  const index = new DockerBotIndex(docker, (what) => faults.push(what));
  t.teardown(() => index.close());
  t.true(await eventually(() => index.byIndex('address', '10.0.0.1') !== undefined), 'the index never came up');
  return { index, streams, faults };
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
