import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { botNamespace } from '../../src/runtime/kubernetes/kube-connection.js';
import { RuntimeUnavailable } from '../../src/errors.js';
import { jsonBytes } from '../../src/json-text.js';
import { MAX_LOG_BYTES } from '../../src/runtime/log-tail.js';
import { startAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { gate } from '../helpers/gate.js';
import { chartGrants } from '../helpers/helm.js';
import { call } from '../helpers/http-client.js';
import { FakeKubeApi } from '../helpers/kube/fake-kube-api.js';
import type { Grants } from '../helpers/kube/rbac.js';
import { NAMESPACE } from './kube-harness.js';

// The Kubernetes driver against the test-only API server, for what the real cluster of
// test/kube-cluster does not show (yet): a cluster without metrics-server, a Role that lacks a
// permission, exact stats arithmetic, a kubelet that stalls half-way through a log, logs past 4 MiB.
// The behaviours of every runtime, and API server faults, run on the real cluster (test/kube-cluster).
let grants: Grants;
test.before(async () => {
  grants = await chartGrants(NAMESPACE);
});

async function setUp(t: { teardown(fn: () => Promise<void>): void }, withGrants: Grants = grants) {
  const api = new FakeKubeApi(NAMESPACE, withGrants);
  await api.start();
  const driver = createKubernetesDriver({ kubeConfig: api.kubeConfig(), namespace: NAMESPACE });
  const agent = await startAgent(driver);
  t.teardown(async () => {
    await agent.close();
    await api.stop();
  });
  return { api, driver, server: agent.server };
}

const owned = (id: string) => ({ bot_id: id, user_id: 'user_1' });

test('without metrics-server, stats are a clear 503, not a crash', async (t) => {
  const { api, server } = await setUp(t);
  api.metricsServer = false;
  api.addBot({ id: 'bot_1_1_a' });
  const reply = await call(server, '/api/bots/bot_1_1_a/stats');
  t.is(reply.status, 503);
  t.regex(String(reply.body?.msg), /runtime unavailable.*metrics\.k8s\.io.*metrics-server/);
});

test("without metrics-server, a round of the console's samples asks once and reads no pod's metrics on its own", async (t) => {
  const { api } = await setUp(t);
  api.metricsServer = false;
  api.addBot({ id: 'bot_1_1_a' });
  api.addBot({ id: 'bot_1_1_b' });
  // A driver started once both pods run (their start is a 30 ms timer of this very process) holds them from its first
  // list, its watches open and silent.
  api.silentWatches = true;
  await new Promise((resolve) => setTimeout(resolve, 100));
  const driver = createKubernetesDriver({ kubeConfig: api.kubeConfig(), namespace: NAMESPACE });
  t.teardown(() => driver.close());
  t.true(await eventually(() => driver.runningBots().length === 2), "the driver's first list never held both bots running");
  t.is((await driver.statsRound?.())?.size, 0);
  const reads = await Promise.allSettled([driver.stats('bot_1_1_a'), driver.stats('bot_1_1_b')]);
  t.true(reads.every((read) => read.status === 'rejected' && /no metrics for the bot's pod/.test(String(read.reason))));
  t.deepEqual(
    api.requests.filter((request) => request.includes('metrics.k8s.io')),
    ['list metrics.k8s.io/pods 404'],
  );
});

test('an API server that takes a list and never answers it fails that list past its deadline: reported, read again, and the agent gets ready once it answers', async (t) => {
  const { api } = await setUp(t);
  api.addBot({ id: 'bot_1_1_a' });
  api.stalled = true;
  const reported: string[] = [];
  const driver = createKubernetesDriver({ kubeConfig: api.kubeConfig(), namespace: NAMESPACE, listPageDeadlineMs: 300, report: (what) => void reported.push(what) });
  t.teardown(() => driver.close());
  t.true(await eventually(() => reported.some((what) => /the watch of the bots' (Deployments|pods)/.test(what)), 10_000), 'a list never answered was never given up');
  api.stalled = false;
  t.true(await eventually(() => driver.ping().then(() => true, () => false), 10_000, 100), 'the lists were not read again once the API server answered');
});

test("a round of the console's samples reads every running bot's stats from one list, as each bot's own read answers them", async (t) => {
  const { api } = await setUp(t);
  api.addBot({ id: 'bot_1_1_limited', usage: { cpu: '150m', memory: '48Mi' }, limits: { cpu: '500m', memory: '256Mi' } });
  api.addBot({ id: 'bot_1_1_free', usage: { cpu: '150m', memory: '48Mi' } });
  api.addBot({ id: 'bot_1_1_stopped', replicas: 0 });
  api.silentWatches = true;
  await new Promise((resolve) => setTimeout(resolve, 100));
  const driver = createKubernetesDriver({ kubeConfig: api.kubeConfig(), namespace: NAMESPACE });
  t.teardown(() => driver.close());
  t.true(await eventually(() => driver.runningBots().length === 2), "the driver's first list never held both bots running");
  const round = await driver.statsRound!();
  t.deepEqual([...round.keys()].sort(), ['bot_1_1_free', 'bot_1_1_limited']);
  t.like(round.get('bot_1_1_limited'), { cpuPercent: 30, memoryPercent: 18.75 });
  t.deepEqual(round.get('bot_1_1_free'), await driver.stats('bot_1_1_free'));
  t.deepEqual(
    api.requests.filter((request) => request.includes('metrics.k8s.io')),
    ['list metrics.k8s.io/pods 200'],
  );
});

test('stats are percentages of the pod limits, else of the node allocatable', async (t) => {
  const { api, server } = await setUp(t);
  const usage = { cpu: '150m', memory: '48Mi' };
  api.addBot({ id: 'bot_1_1_limited', usage, limits: { cpu: '500m', memory: '256Mi' } });
  api.addBot({ id: 'bot_1_1_free', usage });
  const limited = await call(server, '/api/bots/bot_1_1_limited/stats');
  t.like(limited.body, { ok: true, stats: { cpu_percent: 30, memory_usage: '48.00 MB', memory_percent: 18.75, memory_limit_bytes: 256 * 1024 * 1024 } });
  // The fake node offers 2 CPUs and 8 GiB.
  const free = await call(server, '/api/bots/bot_1_1_free/stats');
  t.like(free.body, { ok: true, stats: { cpu_percent: 7.5, memory_percent: 0.59, memory_limit_bytes: 8 * 1024 ** 3 } });
});

test('a call the chart does not grant fails clearly, naming the permission', async (t) => {
  const withoutLogs: Grants = {
    ...grants,
    namespaced: grants.namespaced.filter((rule) => !rule.resources?.includes('pods/log')),
  };
  const { api, server } = await setUp(t, withoutLogs);
  api.addBot({ id: 'bot_1_1_a', logLines: ['x'] });
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: 'bot_1_1_a' } });
  t.is(reply.status, 500);
  t.regex(String(reply.body?.msg), /lacks a permission.*cannot get resource "pods\/log"/);
});

test('a paused Deployment cannot be restarted, and says so', async (t) => {
  const { api, server } = await setUp(t);
  api.addBot({ id: 'bot_1_1_a', paused: true });
  const reply = await call(server, '/api/bots/restart', { body: owned('bot_1_1_a') });
  t.is(reply.status, 500);
  t.regex(String(reply.body?.msg), /^Failed to restart bot bot_1_1_a: .*paused/);
  t.is(api.rollouts('bot_1_1_a'), 0);
});

test('logs past 4 MiB keep the newest whole lines, and a longer line its end', async (t) => {
  const { api, server } = await setUp(t);
  const wide = 'a'.repeat(300 * 1024);
  const huge = 'z'.repeat(6 * 1024 * 1024);
  api.addBot({ id: 'bot_1_1_a', logLines: [...Array.from({ length: 20 }, () => wide), 'short', huge] });
  api.addBot({ id: 'bot_1_1_b', logLines: [...Array.from({ length: 20 }, () => wide), 'short'] });
  const logs = async (botId: string, lines: number) =>
    String((await call(server, '/api/bots/logs', { body: { bot_id: botId, lines } })).body?.logs);
  const end = await logs('bot_1_1_a', 1);
  // Measured as answered: the newline is written `\n`, two bytes.
  t.is(jsonBytes(end), MAX_LOG_BYTES);
  t.true(/^z+\n$/.test(end));
  t.is(await logs('bot_1_1_a', 3), end);
  // 13 lines of 300 KiB and 'short' fit in 4 MiB; the 14th does not.
  const newest = await logs('bot_1_1_b', 100);
  t.is(newest, `${`${wide}\n`.repeat(13)}short\n`);
  t.is(await logs('bot_1_1_b', 2), `${wide}\nshort\n`);
});

test('a log stream that stalls half-way is a 503, not a hang, and the agent stays up', async (t) => {
  const { api, server } = await setUp(t);
  api.stallLogStreams = true;
  api.addBot({ id: 'bot_1_1_a', logLines: ['z'.repeat(5 * 1024 * 1024)] });
  const started = Date.now();
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: 'bot_1_1_a', lines: 1 } });
  t.is(reply.status, 503);
  t.regex(String(reply.body?.msg), /runtime unavailable/);
  // Without a deadline the read would wait for ever; with it, 1.5 s of silence ends it.
  t.true(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.is((await call(server, '/healthz')).status, 200);
});

test('stop scales to 0 and waits until the pod is gone; its logs go with it', async (t) => {
  const { api, server } = await setUp(t);
  api.addBot({ id: 'bot_1_1_a', logLines: ['before stop'] });
  t.is((await call(server, '/api/bots/stop', { body: owned('bot_1_1_a') })).status, 200);
  t.is(api.replicas('bot_1_1_a'), 0);
  t.is(api.livePods('bot_1_1_a').length, 0);
  const logs = await call(server, '/api/bots/logs', { body: { bot_id: 'bot_1_1_a' } });
  t.like(logs, { status: 200, body: { ok: true, logs: '' } });
});

test('start scales to 1 and waits until the new pod runs', async (t) => {
  const { api, server } = await setUp(t);
  api.addBot({ id: 'bot_1_1_a', replicas: 0, startDelayMs: 300 });
  t.is((await call(server, '/api/bots/start', { body: owned('bot_1_1_a') })).status, 200);
  t.is(api.replicas('bot_1_1_a'), 1);
  t.is(api.livePods('bot_1_1_a')[0]?.status.phase, 'Running');
});

test('a pod without the bot label is no bot, whatever address it holds', async (t) => {
  const { api, driver } = await setUp(t);
  api.addBot({ id: 'bot_1_1_a', podIP: '10.0.0.5', labelled: false });
  api.addBot({ id: 'bot_1_1_b', podIP: '10.0.0.6' });
  // Before the watch holds the pods the driver lists them, which a fake API server on busy cores may answer past the
  // 1.5 s deadline (ci6): such a refusal is asked again; an answer is judged as it is.
  const answered = async (address: string): Promise<string | undefined> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await driver.botAtAddress(address);
      } catch (err) {
        if (!(err instanceof RuntimeUnavailable) || attempt === 10) throw err;
      }
    }
  };
  t.is(await answered('10.0.0.5'), undefined);
  t.is(await answered('10.0.0.6'), 'bot_1_1_b');
});

test('the namespace is the configured one, else the pod\'s own, else default', (t) => {
  t.is(botNamespace('team-bots'), 'team-bots');
  // No service account is mounted here, so there is no pod namespace to read.
  t.is(botNamespace(undefined), 'default');
});

test('the agent started with AGENT_RUNTIME=kubernetes and a KUBECONFIG serves bots', async (t) => {
  const { api } = await setUp(t);
  api.addBot({ id: 'bot_1_1_a', logLines: ['hi'] });
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  probe.close();
  const agent = spawn(process.execPath, ['--import=tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      AGENT_RUNTIME: 'kubernetes',
      KUBECONFIG: api.kubeConfigFile(),
      AGENT_NAMESPACE: NAMESPACE,
      AGENT_HOST: '127.0.0.1',
      AGENT_PORT: String(port),
    },
    stdio: 'ignore',
  });
  t.teardown(() => {
    agent.kill();
  });
  const url = `http://127.0.0.1:${port}`;
  t.true(await eventually(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, 20_000, 100));
  const logs = await fetch(`${url}/api/bots/logs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ bot_id: 'bot_1_1_a' }),
  });
  t.deepEqual(await logs.json(), { ok: true, logs: 'hi\n' });
  agent.kill('SIGTERM');
  const [code] = await once(agent, 'exit');
  t.is(code, 0);
});

test('an agent is not ready before its first watches have opened (or failed): until then its answers would all be look-ups', async (t) => {
  const api = new FakeKubeApi(NAMESPACE, grants);
  await api.start();
  const held = gate();
  api.holdWatches = held.promise;
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: api.kubeConfig(), namespace: NAMESPACE }));
  t.teardown(async () => {
    held.open();
    await agent.close();
    await api.stop();
  });
  const early = await call(agent.server, '/readyz');
  t.is(early.status, 503, early.text);
  t.regex(String(early.body?.msg), /^runtime unavailable: .*watches .* not synced yet/);
  held.open();
  t.true(await eventually(async () => (await call(agent.server, '/readyz')).status === 200, 10_000, 50));
});
