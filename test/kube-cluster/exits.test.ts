import test from 'ava';
import { AppsV1Api } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { openStream } from '../helpers/sse-client.js';
import { adminKubeConfig, botDeployment, clusterHarness } from './cluster-harness.js';
import type { RuntimeHarness } from '../behaviours/runtime-harness.js';

// Why a bot died (docs/api.md §8-10) on the real cluster, from the agent's watch of pods.

let agent: TestAgent;
let harness: RuntimeHarness;
let namespace: string;
const apps = adminKubeConfig().makeApiClient(AppsV1Api);

test.before(async () => {
  const cluster = await clusterHarness();
  harness = cluster.harness;
  namespace = cluster.namespace;
  agent = await startAgent(createKubernetesDriver({ kubeConfig: cluster.agentConfig, namespace }));
});

test.after.always(async () => {
  await agent?.close();
  await harness?.close();
});

interface Exit {
  exit_code: number | null;
  signal: string | null;
  oom_killed: boolean;
  requested: boolean;
  logs: string;
  started_at: string | null;
}

async function deploy(script: string, memory?: string): Promise<string> {
  const id = harness.newBotId();
  const deployment = botDeployment(id, { script });
  if (memory) deployment.spec!.template.spec!.containers[0]!.resources = { limits: { memory } };
  await apps.createNamespacedDeployment({ namespace, body: deployment });
  return id;
}

async function awaitExits(id: string, count: number, ms = 60_000): Promise<Exit[]> {
  let exits: Exit[] = [];
  const ok = await eventually(async () => {
    const reply = await call(agent.server, `/api/bots/${id}/exits`);
    exits = (reply.body?.exits as Exit[] | undefined) ?? [];
    return exits.length >= count;
  }, ms, 250);
  if (!ok) throw new Error(`bot ${id} has ${exits.length} exit records, not ${count}`);
  return exits;
}

test('a bot that exits 3 and is restarted by the kubelet: its record with its lines, then crash-looping', async (t) => {
  const id = await deploy('echo "fatal: bad token $RANDOM"; exit 3');
  const events = await openStream(agent.server, `/api/bots/${id}/events`);
  const [exit] = await awaitExits(id, 1);
  t.like(exit, { exit_code: 3, signal: null, oom_killed: false, requested: false });
  t.regex(exit!.logs, /^fatal: bad token \d+\n$/);
  t.truthy(exit!.started_at);
  // The kubelet waits 10 s, then 20 s, before the next runs.
  const looping = await events.next((e) => e.event === 'crash-looping', 90_000);
  t.like(looping.data, { crashes: 3, window_s: 600 });
  t.like((await call(agent.server, `/api/bots/${id}`)).body?.bot, { state: 'crash-looping', crashes_last_hour: 3 });
  const logs = (await awaitExits(id, 3)).map((e) => e.logs);
  t.is(new Set(logs).size, 3, "each record holds its own run's line");
  // Between its runs, its logs are its last run's (not the one before, which the kubelet has removed).
  const between = await call(agent.server, '/api/bots/logs', { body: { bot_id: id, lines: 5 } });
  t.regex(String(between.body?.logs), /^fatal: bad token \d+\n$/);
  events.close();
});

test('a bot OOM-killed under its memory limit: oom_killed, SIGKILL, not requested', async (t) => {
  // Allocating after a pause: containerd watches the container's memory only once it started (docs/api.md §8).
  const id = await deploy('sleep 2; echo allocating; x=0123456789abcdef; while :; do x="$x$x"; done', '16Mi');
  const [exit] = await awaitExits(id, 1);
  t.like(exit, { oom_killed: true, requested: false, exit_code: 137, signal: 'SIGKILL' });
  t.regex(exit!.logs, /allocating/);
});

test('stopped through the agent: the deleted pod ends a requested run, its last lines kept; live logs follow until then', async (t) => {
  const id = await deploy('trap "echo saving state; exit 0" TERM; echo "hello from the pod"; while :; do sleep 1 & wait $!; done');
  t.true(await eventually(async () => (await call(agent.server, `/api/bots/${id}`)).body?.bot !== undefined && ((await call(agent.server, `/api/bots/${id}`)).body?.bot as { state: string }).state === 'running', 60_000, 250));
  const follower = await openStream(agent.server, `/api/bots/${id}/logs?follow=true`);
  t.is(follower.status, 200);
  await follower.next((e) => e.data.line === 'hello from the pod');
  t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: id, user_id: 'user_1' } })).status, 200);
  const [exit] = await awaitExits(id, 1);
  t.like(exit, { requested: true, oom_killed: false });
  t.regex(exit!.logs, /hello from the pod/);
  await follower.next((e) => e.event === 'exited');
  t.like((await call(agent.server, `/api/bots/${id}`)).body?.bot, { state: 'stopped', started_at: null });
  follower.close();
});

test('live logs follow a bot across the kubelet\'s restart: its lines, the exited event, then the next run\'s lines', async (t) => {
  // The pod's emptyDir keeps the count across its container's runs: run 1 ends with 3, run 2 stays up.
  const id = harness.newBotId();
  const deployment = botDeployment(id, {
    script: 'n=$(( $(cat /runs/count 2>/dev/null || echo 0) + 1 )); echo $n > /runs/count; echo "run $n says hello"; [ $n -eq 1 ] && { sleep 3; exit 3; }; while :; do sleep 1; done',
  });
  deployment.spec!.template.spec!.volumes = [{ name: 'runs', emptyDir: {} }];
  deployment.spec!.template.spec!.containers[0]!.volumeMounts = [{ name: 'runs', mountPath: '/runs' }];
  await apps.createNamespacedDeployment({ namespace, body: deployment });
  t.true(await eventually(async () => ((await call(agent.server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined)?.state === 'running', 60_000, 100));
  const follower = await openStream(agent.server, `/api/bots/${id}/logs?follow=true`);
  t.is(follower.status, 200);
  const first = await follower.next((e) => e.data.line === 'run 1 says hello');
  const exited = await follower.next((e) => e.event === 'exited', 30_000);
  t.like(exited.data, { bot_id: id, exit: { exit_code: 3, requested: false } });
  const second = await follower.next((e) => e.data.line === 'run 2 says hello', 30_000);
  t.true(follower.events.indexOf(first) < follower.events.indexOf(exited) && follower.events.indexOf(exited) < follower.events.indexOf(second));
  t.is(follower.events.filter((e) => e.event === 'log').length, 2, 'each line once');
  follower.close();
});
