import test from 'ava';
import { CLOCK_AHEAD_MS, NODE_AWAY_MS, NodeBeacon, REWRITE_MS } from '../../src/fleet/node-beacon.js';
import { NodeSeal } from '../../src/fleet/node-seal.js';
import type { NodeBot, NodeRecord } from '../../src/history/history-store.js';
import type { BotSummary } from '../../src/provisioning/bot-spec.js';

// A node's beacon (docs/api.md §17): alive at every renewal; its bots written only when they changed, and never
// while the runtime's index is being built (that would say the node holds none).
function beacon(listing: () => readonly BotSummary[] | undefined, records: NodeRecord[] = [], fleetKey?: string) {
  const renewals: number[] = [];
  const seals: (string | null)[] = [];
  const writes: NodeBot[][] = [];
  let nowMs = 1_000_000;
  const store = {
    renewNode: async (_name: string, _url: string | null, atMs: number, seal: string | null) => {
      renewals.push(atMs);
      seals.push(seal);
    },
    putNodeBots: async (_name: string, bots: readonly NodeBot[]) => void writes.push([...bots]),
    nodes: async () => records,
    nodeOfBot: async () => records.at(-1),
    botsOfNode: async () => [],
    isAway: () => false,
  };
  const made = new NodeBeacon(store, { listedBots: listing }, 'node-a', undefined, fleetKey, () => undefined, () => nowMs, 3_600_000);
  return { made, renewals, seals, writes, advance: (ms: number) => (nowMs += ms) };
}

const running = (id: string): BotSummary => ({ bot_id: id, user_id: 'user_1', template: undefined, state: 'running', started_at: undefined, image: undefined, revision: 1 });

test('bots are written when they change, not at every renewal; a listing not built yet writes none', async (t) => {
  let listed: BotSummary[] | undefined;
  const { made, renewals, writes, advance } = beacon(() => listed);
  t.teardown(() => made.close());
  await made.renew();
  t.is(writes.length, 0, 'the index being built says nothing of the bots');
  listed = [running('bot_2_2_b'), running('bot_1_1_a')];
  await made.renew();
  await made.renew();
  t.deepEqual(writes, [[{ botId: 'bot_1_1_a', running: true }, { botId: 'bot_2_2_b', running: true }]]);
  listed = [running('bot_1_1_a')];
  await made.renew();
  t.is(writes.length, 2);
  t.true(renewals.length >= 4, 'alive at every renewal');
  // Unchanged, written again once REWRITE_MS passed: a row another node took is this node's again.
  advance(REWRITE_MS - 1);
  await made.renew();
  t.is(writes.length, 2);
  advance(1);
  await made.renew();
  t.is(writes.length, 3);
});

test('a node is away once NODE_AWAY_MS pass without a renewal; the answering node is alive whatever its row says', async (t) => {
  const { made } = beacon(() => [], [
    { name: 'node-a', url: null, aliveMs: 1_000_000 - 60_000, seal: null, bots: 0, running: 0 },
    { name: 'node-b', url: null, aliveMs: 1_000_000 - NODE_AWAY_MS + 1, seal: null, bots: 3, running: 2 },
    { name: 'node-c', url: 'http://10.0.0.3:8000', aliveMs: 1_000_000 - NODE_AWAY_MS, seal: null, bots: 1, running: 1 },
  ]);
  t.teardown(() => made.close());
  t.deepEqual(
    (await made.nodes()).map((node) => [node.node, node.alive, node.self]),
    [
      ['node-a', true, true],
      ['node-b', true, false],
      ['node-c', false, false],
    ],
  );
});

test("the driver's very list, unchanged since the last renewal, is not worked over again until REWRITE_MS pass", async (t) => {
  let reads = 0;
  // The list as the Kubernetes driver keeps it while nothing changed: the same array each time; each read of its bots counted.
  const kept = new Proxy([running('bot_1_1_a')], {
    get: (target, key, receiver) => {
      if (key === 'map') reads++;
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  const { made, writes, advance } = beacon(() => kept);
  t.teardown(() => made.close());
  await made.renew();
  await made.renew();
  await made.renew();
  t.is(reads, 1);
  t.is(writes.length, 1);
  advance(REWRITE_MS);
  await made.renew();
  t.is(reads, 2);
  t.is(writes.length, 2);
  // A list equal to the last, but a new one (the Docker driver's each time): compared, not written again.
  const { made: other, writes: otherWrites } = beacon(() => [running('bot_1_1_a')]);
  t.teardown(() => other.close());
  await other.renew();
  await other.renew();
  t.is(otherWrites.length, 1);
});

test("with a fleet key, a node's row is called only when it bears the key's seal and a liveness not yet to come; its own row is sealed", async (t) => {
  const KEY = 'fleet-key-0123456789abcdef0123456789abcdef';
  const sealed = (name: string, url: string, aliveMs: number, key = KEY): NodeRecord => ({ name, url, aliveMs, seal: new NodeSeal(key).of({ name, url, aliveMs }), bots: 1, running: 1 });
  const nowMs = 1_000_000;
  const records: NodeRecord[] = [
    sealed('node-b', 'http://10.0.0.2:8000', nowMs - 1_000),
    { ...sealed('node-c', 'http://10.0.0.3:8000', nowMs - 1_000), url: 'http://10.9.9.9:8000' },
    sealed('node-d', 'http://10.0.0.4:8000', nowMs - 1_000, 'another-key-0123456789abcdef0123456789ab'),
    { name: 'node-e', url: 'http://10.0.0.5:8000', aliveMs: nowMs, seal: null, bots: 0, running: 0 },
    sealed('node-f', 'http://10.0.0.6:8000', nowMs + CLOCK_AHEAD_MS + 1),
    sealed('node-g', 'http://10.0.0.7:8000', nowMs + CLOCK_AHEAD_MS - 1),
  ];
  const { made, seals } = beacon(() => [], records, KEY);
  t.teardown(() => made.close());
  await made.renew();
  t.true(new NodeSeal(KEY).holds({ name: 'node-a', url: null, aliveMs: nowMs }, seals.at(-1) ?? null), 'its own row not sealed');
  const viewed = Object.fromEntries((await made.nodes()).map((node) => [node.node, node]));
  t.like(viewed['node-b'], { url: 'http://10.0.0.2:8000', alive: true, refused: undefined });
  for (const name of ['node-c', 'node-d', 'node-e']) t.like(viewed[name], { url: null, alive: false, refused: "its row in the database does not bear the fleet key's seal" }, name);
  t.like(viewed['node-f'], { url: null, alive: false });
  t.regex(String(viewed['node-f']?.refused), /a time still to come/);
  t.like(viewed['node-g'], { url: 'http://10.0.0.7:8000', alive: true }, 'a little skew is taken');
  t.like(await made.nodeNamed('node-c'), { url: null });
  t.like(await made.nodeOfBot('any'), { name: 'node-g', url: 'http://10.0.0.7:8000' });
  t.is((await made.nodeNamed('node-b'))?.url, 'http://10.0.0.2:8000');
});
