import { randomBytes } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import test from 'ava';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { LeaseLocks } from '../../src/runtime/kubernetes/kube-leases.js';
import { KubeRevisions } from '../../src/runtime/kubernetes/kube-revisions.js';
import { leaseName, objectName } from '../../src/runtime/kubernetes/kube-names.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { RuntimeUnavailable } from '../../src/errors.js';
import { HEALTH_GRACE_LABEL } from '../../src/runtime/labels.js';
import { mapLimited } from '../../src/map-limited.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { openStream } from '../helpers/sse-client.js';
import type { EventStream } from '../helpers/sse-client.js';
import { adminKubeConfig, agentKubeConfig, kwokBotDeployment } from './cluster-harness.js';

// Two agents over one PostgreSQL against the real API server, their bots on kwok's simulated node
// (scripts/kube/kwok.sh): pods that run without a process, a tenth of them crash-looping by kwok's stages.
// What is measured at 5,000 bots is the bench's (npm run bench:kube-scale, docs/performance.md); this file
// proves at 200 that the agent lists them, reads them, reports the crash loops and keeps its Leases there.
const BOTS = 200;
const CRASHING = BOTS / 10;
/** The simulated node kwok.sh made (its last line of output; npm test passes it on). */
const KWOK_NODE = process.env.BOT_AGENT_KWOK_NODE;
const runId = randomBytes(3).toString('hex');
const namespace = `kwok-${runId}`;
const admin = adminKubeConfig();
const apps = admin.makeApiClient(AppsV1Api);
const core = admin.makeApiClient(CoreV1Api);
const leases = admin.makeApiClient(CoordinationV1Api);
const botIds = Array.from({ length: BOTS }, (_, i) => `bot_${process.pid}_${i}_kwok${runId}`);
const crashing = new Set(botIds.slice(0, CRASHING));
const agents: TestAgent[] = [];
let events: EventStream;
let agentConfig: KubeConfig;

/** A bot's Deployment placed on the simulated node (its taint tolerated), crash-looping by kwok's stage or not. */
async function agentNamed(holder: string, agentConfig: KubeConfig, databaseUrl: string): Promise<TestAgent> {
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: agentConfig, namespace }), {
    databaseUrl,
    locks: new LeaseLocks(agentConfig, namespace, holder),
  });
  agents.push(agent);
  if (!(await eventually(async () => (await call(agent.server, '/readyz')).status === 200, 30_000, 100))) throw new Error(`${holder} never became ready`);
  return agent;
}

test.before(async () => {
  if (!KWOK_NODE) throw new Error('no simulated node: BOT_AGENT_KWOK_NODE is unset; npm test makes one with scripts/kube/kwok.sh');
  agentConfig = await agentKubeConfig(admin, namespace, { 'database.existingSecret': 'history-db' });
  const databaseUrl = await freshDatabase();
  await agentNamed('agent-a', agentConfig, databaseUrl);
  await agentNamed('agent-b', agentConfig, databaseUrl);
  events = await openStream(agents[0]!.server, '/api/events');
  await mapLimited(botIds, 20, (id) => apps.createNamespacedDeployment({ namespace, body: kwokBotDeployment(id, crashing.has(id)) }));
});

test.after.always(async () => {
  events?.close();
  for (const agent of agents) await agent.close();
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  await dropDatabases();
});

interface ListedBot {
  bot_id: string;
  state: string;
}

test.serial("each agent's table lists every simulated bot, running or crash-looping", async (t) => {
  const pods = async () => (await core.listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${KWOK_NODE}` })).items;
  t.true(await eventually(async () => (await pods()).filter((pod) => pod.status?.phase === 'Running').length >= BOTS, 180_000, 1_000), 'the simulated pods never all ran');
  for (const agent of agents) {
    let listed: ListedBot[] = [];
    const all = await eventually(async () => {
      const reply = await call(agent.server, '/api/console/fleet');
      listed = reply.status === 200 ? ((reply.body?.bots as ListedBot[]) ?? []) : [];
      const running = listed.filter((bot) => bot.state === 'running').length;
      const looping = listed.filter((bot) => bot.state === 'crash-looping').length;
      return running === BOTS - CRASHING && looping === CRASHING;
    }, 60_000, 500);
    t.true(all, `listed: ${listed.length}, running: ${listed.filter((bot) => bot.state === 'running').length}`);
    t.deepEqual(listed.map((bot) => bot.bot_id).sort(), [...botIds].sort());
    t.deepEqual(listed.filter((bot) => bot.state === 'crash-looping').map((bot) => bot.bot_id).sort(), [...crashing].sort());
  }
});

test.serial("every bot's status is read through either agent; a simulated bot's logs and a crashed run's record come from kwok's files", async (t) => {
  const failed: string[] = [];
  await mapLimited(botIds, 25, async (id) => {
    const agent = agents[botIds.indexOf(id) % 2]!;
    const reply = await call(agent.server, `/api/bots/${id}`);
    if (reply.status !== 200 || (reply.body?.bot as { bot_id?: string } | undefined)?.bot_id !== id) failed.push(`${id}: ${reply.status} ${reply.text}`);
  });
  t.deepEqual(failed, []);
  const steady = botIds[BOTS - 1]!;
  const logs = await call(agents[1]!.server, '/api/bots/logs', { body: { bot_id: steady, lines: 10 } });
  t.is(logs.status, 200, logs.text);
  t.regex(String(logs.body?.logs), /hello from a simulated bot\ntick/);
  const crashed = botIds[0]!;
  let exits: { exit_code: number | null; requested: boolean; logs: string }[] = [];
  t.true(await eventually(async () => {
    exits = ((await call(agents[0]!.server, `/api/bots/${crashed}/exits`)).body?.exits as typeof exits | undefined) ?? [];
    return exits.some((exit) => /the previous run failed/.test(exit.logs));
  }, 30_000, 250), `no exit record of a crashed run with its lines: ${JSON.stringify(exits)}`);
  // (On a busy host the lines of one run may not be read in time: its record is kept without them, the next ones with.)
  t.like(exits.find((exit) => /the previous run failed/.test(exit.logs)), { exit_code: 1, requested: false });
});

test.serial('each crash-looping bot is reported once, as crash-looping, in the one event stream of both agents', async (t) => {
  for (const id of crashing) {
    const looping = await events.next((event) => event.event === 'crash-looping' && event.data.bot_id === id, 60_000);
    t.like(looping.data, { crashes: 3, window_s: 600 });
  }
  const status = await call(agents[1]!.server, `/api/bots/${botIds[1]}`);
  t.like(status.body?.bot, { state: 'crash-looping' });
  t.true(Number((status.body?.bot as { crashes_last_hour: number }).crashes_last_hour) >= 3);
  // Both agents watched every crash; the shared history keeps each run's end, and so each loop's start, once.
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const loopsOf = (id: string) => events.events.filter((event) => event.event === 'crash-looping' && event.data.bot_id === id).length;
  t.deepEqual(botIds.filter((id) => crashing.has(id) && loopsOf(id) !== 1), []);
  t.deepEqual(botIds.filter((id) => !crashing.has(id) && loopsOf(id) !== 0), []);
});

test.serial('a restart of a simulated bot asked of both agents at once: one rollout under one Lease, both answered, the Lease let go', async (t) => {
  const id = botIds[BOTS - 2]!;
  const generation = async () => (await apps.readNamespacedDeployment({ name: objectName(id), namespace })).metadata?.generation ?? 0;
  // A simulated bot's rollout is quick: on busy cores one agent's restart may end before the other's call arrives,
  // and that second ask is a restart of its own. So: never more rollouts than asks, and one for asks that overlapped,
  // seen in at least one of three tries (ci2 of 2026-12-06 saw two once).
  const rollouts: number[] = [];
  for (let attempt = 0; attempt < 3 && !rollouts.includes(1); attempt += 1) {
    const before = await generation();
    const [first, second] = await Promise.all(agents.map((agent) => call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_1' } })));
    t.is(first!.status, 200, first!.text);
    t.is(second!.status, 200, second!.text);
    rollouts.push((await generation()) - before);
  }
  t.true(rollouts.every((count) => count === 1 || count === 2), `rollouts of each try: ${rollouts.join(', ')}`);
  t.true(rollouts.includes(1), `one rollout, not two, for asks at once: ${rollouts.join(', ')}`);
  t.true(
    await eventually(async () => (await leases.listNamespacedLease({ namespace })).items.every((lease) => lease.metadata?.name !== leaseName(id)), 5_000, 100),
    'the Lease is still held',
  );
  const status = await call(agents[0]!.server, `/api/bots/${id}`);
  t.like(status.body?.bot, { state: 'running' });
});

test.serial("a driver started beside every simulated bot lists their Deployments and pods a page at a time, holds every one, and looks at their health again without working it out again", async (t) => {
  const PAGE = 60;
  const pages = { deployments: [] as string[], pods: [] as string[] };
  const onRequest = (message: unknown): void => {
    const { request } = message as { request: { path: string } };
    if (request.path.includes('watch=true') || !request.path.includes(`limit=${PAGE}`)) return;
    if (request.path.includes('/deployments?')) pages.deployments.push(request.path);
    if (request.path.includes('/pods?')) pages.pods.push(request.path);
  };
  subscribe('undici:request:create', onRequest);
  const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace, listPage: PAGE });
  t.teardown(() => driver.close());
  try {
    t.true(await eventually(async () => (await driver.ping().then(() => true, () => false)), 30_000, 100), 'the watches never synced');
  } finally {
    unsubscribe('undici:request:create', onRequest);
  }
  const pageCount = Math.ceil(BOTS / PAGE);
  // (A watch broken meanwhile lists again: more pages, never fewer.)
  t.true(pages.deployments.length >= pageCount, pages.deployments.join('\n'));
  t.true(pages.deployments.filter((path) => path.includes('continue=')).length >= pageCount - 1);
  t.true(pages.pods.length >= pageCount, pages.pods.join('\n'));
  const listed = driver.listedBots() ?? [];
  t.deepEqual(listed.map((bot) => bot.bot_id).sort(), [...botIds].sort());
  t.is(driver.runningBots().length, BOTS);
  t.true((driver.watchedDeployments() ?? []).every((deployment) => deployment.metadata?.managedFields === undefined));
  // The watchdog's look each second: what no change of a pod or Deployment has touched since is not worked out again.
  const first = driver.runningHealth();
  const looked = new Map(first.map((bot) => [bot.botId, bot]));
  const again = driver.runningHealth();
  t.is(again.length, BOTS);
  t.true(again.every((bot) => looked.get(bot.botId) === bot));
  // Nothing changed between the two looks (no await between them), and no bot is starting: the very same entries.
  t.is(again, first);
  // The list of bots too stays the one array until something changes (the node's beacon asks every 5 s).
  const listedBefore = driver.listedBots();
  t.is(driver.listedBots(), listedBefore);
  // A change of a bot's Deployment is seen at the next look: its health policy, here.
  const changed = botIds[BOTS - 1]!;
  await apps.patchNamespacedDeployment(
    { name: objectName(changed), namespace, body: { metadata: { annotations: { [HEALTH_GRACE_LABEL]: '45' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.true(await eventually(async () => driver.runningHealth().find((bot) => bot.botId === changed)?.policy.graceMs === 45_000, 10_000, 50), 'the new grace was never seen');
  t.not(driver.listedBots(), listedBefore);
});

test.serial("a round of the console's samples over every simulated bot asks metrics.k8s.io once, and each bot's read is answered from it", async (t) => {
  const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace });
  t.teardown(() => driver.close());
  t.true(await eventually(async () => driver.runningBots().filter((id) => id.endsWith(runId)).length === BOTS, 30_000, 100), 'the watch never held every bot');
  const asked: string[] = [];
  const onRequest = (message: unknown): void => {
    const { request } = message as { request: { path: string } };
    if (request.path.includes('/apis/metrics.k8s.io/')) asked.push(request.path);
  };
  subscribe('undici:request:create', onRequest);
  let reads: PromiseSettledResult<unknown>[];
  try {
    // kwok's pods have no metrics: the round has none, and makes no error for each.
    t.is((await driver.statsRound?.())?.size, 0);
    reads = await Promise.allSettled(botIds.map((id) => driver.stats(id)));
  } finally {
    unsubscribe('undici:request:create', onRequest);
  }
  t.is(asked.length, 1, asked.slice(0, 3).join(' '));
  // kwok's pods have no metrics: each read says so, as a pod metrics-server has not measured yet.
  t.true(reads.every((read) => read.status === 'rejected' && read.reason instanceof RuntimeUnavailable && /no metrics for the bot's pod/.test(read.reason.message)));
});

test.serial('deploys an agent left unfinished are looked for in the watch of the Deployments, not in a list of every one', async (t) => {
  const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace });
  t.teardown(() => driver.close());
  const revisions = new KubeRevisions(agentConfig.makeApiClient(AppsV1Api), agentConfig.makeApiClient(CoreV1Api), agentConfig, namespace, async (template) => template, () => driver.watchedDeployments());
  t.true(await eventually(async () => (driver.watchedDeployments()?.length ?? 0) >= BOTS, 30_000, 100), 'the watch never held every Deployment');
  // What a deploy under way leaves on its bot's Deployment (kube-revisions.ts) when its agent dies.
  const left = botIds[BOTS - 3]!;
  const deploy = { from: 1, to: 2, deadlineAtMs: Date.now() + 60_000, template: {} };
  await apps.patchNamespacedDeployment(
    { name: objectName(left), namespace, body: { metadata: { annotations: { 'bot-agent/deploy': JSON.stringify(deploy) } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const listed: string[] = [];
  const onRequest = (message: unknown): void => {
    const { request } = message as { request: { path: string } };
    if (request.path.includes('/deployments') && !request.path.includes('watch=true')) listed.push(request.path);
  };
  subscribe('undici:request:create', onRequest);
  let found: string[] = [];
  try {
    t.true(await eventually(async () => (found = (await revisions.leftDeploys()).map((deploy) => deploy.botId)).includes(left), 30_000, 100), 'the deploy left was not found');
  } finally {
    unsubscribe('undici:request:create', onRequest);
  }
  t.deepEqual(found, [left]);
  t.deepEqual(listed, []);
});
