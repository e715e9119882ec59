import { generateKeyPairSync, createPrivateKey, sign } from 'node:crypto';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CoreV1Api } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { Identity } from '../../src/config.js';
import { listen } from '../../src/http/listen.js';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { ServiceAccountTokens, TOKEN_PATH } from '../../src/runtime/kubernetes/kube-token-review.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { asPlatform, TEST_ADMIN_TOKEN, TEST_APP_CONFIG } from '../helpers/agent.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';
import { adminKubeConfig, clusterHarness, HOST_ADDRESS } from './cluster-harness.js';
import { execInPod, httpFromPod } from './pod-exec.js';

// Identity by projected ServiceAccount token on the real cluster (docs/api.md §4, rule 8): the token the
// kubelet mounts in a provisioned bot's pod, verified by the real API server's TokenReview.

const run = promisify(execFile);
/** A versioned tag: Kubernetes pulls `:latest` always, and no registry is reachable here. */
const IMAGE = 'bot-agent-testbot:identity';

test.before(async () => {
  await run('/usr/bin/docker', ['tag', TEST_IMAGE, IMAGE]);
  await run('bash', ['scripts/kube/images.sh', IMAGE]);
});

/** The key the cluster signs ServiceAccount tokens with (scripts/kube/certs.sh): to mint one already expired. */
const CLUSTER_SIGNING_KEY = '/var/lib/bot-agent-kube/pki/sa.key';

interface Cluster {
  namespace: string;
  core: CoreV1Api;
  agent(identity: Identity): Promise<{ server: Server; port: number }>;
  logLines: string[];
}

async function onCluster(t: ExecutionContext): Promise<Cluster> {
  const { harness, namespace, agentConfig } = await clusterHarness({ 'identity.mode': 'token' });
  const logLines: string[] = [];
  const closers: (() => Promise<void>)[] = [];
  t.teardown(async () => {
    for (const close of closers) await close();
    await harness.close();
  });
  return {
    namespace,
    core: adminKubeConfig().makeApiClient(CoreV1Api),
    logLines,
    async agent(identity) {
      const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace });
      const made = assembleAgent({
        driver,
        provisioner: createKubernetesProvisioner({ kubeConfig: agentConfig, namespace, agentUrl: 'http://agent:8000' }),
        botTokens: new ServiceAccountTokens(agentConfig, namespace),
        config: { ...TEST_APP_CONFIG, identity, adminToken: TEST_ADMIN_TOKEN },
        logger: pino(lineSink(logLines)),
        statsSamples: 'off',
      });
      const server = await listen(made.app, '0.0.0.0', 0);
      closers.push(async () => {
        server.closeAllConnections();
        server.close();
        await made.close();
      });
      if (!(await eventually(async () => (await call(server, '/readyz')).status === 200, 30_000, 100))) throw new Error('the agent never became ready');
      return { server, port: (server.address() as AddressInfo).port };
    },
  };
}

/** A bot made through the agent (so with its projected token), once its pod runs: its pod and the token inside it. */
async function provisionedBot(cluster: Cluster, server: Server, id: string): Promise<{ pod: V1Pod; token: string }> {
  const created = await call(server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_7', image: IMAGE, template: 'discord', token: 'discord-secret-0123456789', command: ['sh', '-c', 'while :; do sleep 1; done'] },
  });
  if (created.status !== 201) throw new Error(`create ${id}: ${created.status} ${created.text}`);
  let pod: V1Pod | undefined;
  const ran = await eventually(async () => {
    const pods = await cluster.core.listNamespacedPod({ namespace: cluster.namespace, labelSelector: `${BOT_LABEL}=${id}` });
    pod = pods.items.find((item) => item.status?.phase === 'Running' && !item.metadata?.deletionTimestamp);
    return pod !== undefined;
  }, 90_000, 250);
  if (!ran || !pod) throw new Error(`bot ${id} never ran`);
  // Read as the bot's own (non-root) user, from where the provisioner told it.
  const token = (await execInPod(adminKubeConfig(), cluster.namespace, pod.metadata?.name ?? '', ['sh', '-c', 'cat "$PLATFORM_AGENT_TOKEN_FILE"'])).trim();
  return { pod, token };
}

function jwt(claims: Record<string, unknown>, key: Parameters<typeof sign>[2]): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const body = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode(claims)}`;
  return `${body}.${sign('sha256', Buffer.from(body), key).toString('base64url')}`;
}

/** A projected token's claims for `pod`, as the cluster mints them, with `change`. */
function claimsFor(namespace: string, pod: V1Pod, change: Record<string, unknown>): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return {
    aud: ['bot-agent'],
    iss: 'https://kubernetes.default.svc.cluster.local',
    sub: `system:serviceaccount:${namespace}:default`,
    iat: now - 7200,
    nbf: now - 7200,
    exp: now + 3600,
    'kubernetes.io': { namespace, pod: { name: pod.metadata?.name, uid: pod.metadata?.uid }, serviceaccount: { name: 'default', uid: '00000000-0000-0000-0000-000000000000' } },
    ...change,
  };
}

test('token: a provisioned bot acts on itself with its projected token, also through a 127.0.0.6 hop; foreign-audience, expired, forged, unbound and unlabelled tokens are 403; no log line holds a token', async (t) => {
  const cluster = await onCluster(t);
  const { server, port } = await cluster.agent('token');
  const id = `bot_${process.pid}_1_${cluster.namespace.slice(5)}`;
  const { pod, token } = await provisionedBot(cluster, server, id);
  t.truthy(pod.spec?.volumes?.find((volume) => volume.projected?.sources?.some((source) => source.serviceAccountToken?.audience === 'bot-agent')));
  t.is(pod.spec?.containers[0]?.env?.find((variable) => variable.name === 'PLATFORM_AGENT_TOKEN_FILE')?.value, TOKEN_PATH);
  const podName = pod.metadata?.name ?? '';
  const fromPod = (headers: Record<string, string>, path = `/api/bots/${id}`) =>
    httpFromPod(adminKubeConfig(), cluster.namespace, podName, { host: HOST_ADDRESS, port }, { method: 'GET', path, headers });

  const own = await fromPod({ authorization: `Bot ${token}` });
  t.is(own.status, 200, own.raw);
  const restarted = await httpFromPod(adminKubeConfig(), cluster.namespace, podName, { host: HOST_ADDRESS, port }, {
    method: 'POST',
    path: '/api/bots/self/restart',
    headers: { authorization: `Bot ${token}` },
  });
  t.is(restarted.status, 200, restarted.raw);
  t.is(restarted.body?.message, `Bot ${id} is restarting`);
  t.true(
    await eventually(async () => {
      const pods = await cluster.core.listNamespacedPod({ namespace: cluster.namespace, labelSelector: `${BOT_LABEL}=${id}` });
      return pods.items.some((item) => item.status?.phase === 'Running' && item.metadata?.uid !== pod.metadata?.uid && !item.metadata?.deletionTimestamp);
    }, 60_000, 250),
    'the restart replaced the pod',
  );
  // The token is bound to the pod it was mounted in: the new pod has its own, and the old one's is gone with it.
  const bare = await call(server, `/api/bots/${id}`, { from: '127.0.0.6' });
  t.is(bare.status, 403, 'a hop with no token is nobody');

  const second = await provisionedBot(cluster, server, `bot_${process.pid}_2_${cluster.namespace.slice(5)}`);
  const headers = { authorization: `Bot ${second.token}` };
  const hop = await call(server, `/api/bots/${second.pod.metadata?.labels?.[BOT_LABEL]}`, { headers, from: '127.0.0.6' });
  t.is(hop.status, 200, hop.text);
  const naming = await call(server, `/api/bots/${id}`, { headers, from: '127.0.0.6' });
  t.is(naming.status, 403);
  t.regex(String(naming.body?.msg), /may manage only itself/);
  t.is((await call(server, '/api/events', { headers })).status, 403, "the host itself with a bot's token is that bot, not the platform");

  const refusedWith = async (presented: string, reason: RegExp, what: string) => {
    const reply = await call(server, `/api/bots/${id}`, { headers: { authorization: `Bot ${presented}` }, from: '127.0.0.6' });
    t.is(reply.status, 403, what);
    t.regex(String(reply.body?.msg), reason, what);
    return presented;
  };
  const secondPod = second.pod;
  const bound = { kind: 'Pod', apiVersion: 'v1', name: secondPod.metadata?.name, uid: secondPod.metadata?.uid };
  const requested = async (spec: Record<string, unknown>) =>
    (await cluster.core.createNamespacedServiceAccountToken({ name: 'default', namespace: cluster.namespace, body: { spec: { expirationSeconds: 600, ...spec } } })).status
      ?.token ?? '';
  const presented = [
    await refusedWith(await requested({ audiences: ['vault'], boundObjectRef: bound }), /not for the audience bot-agent/, 'a token for another audience'),
    await refusedWith(await requested({ audiences: ['bot-agent'] }), /names no pod/, 'a token bound to no pod'),
    await refusedWith(
      jwt(claimsFor(cluster.namespace, secondPod, { exp: Math.floor(Date.now() / 1000) - 60 }), createPrivateKey(readFileSync(CLUSTER_SIGNING_KEY))),
      /has expired/,
      'a token the cluster signed that has expired',
    ),
    await refusedWith(
      jwt(claimsFor(cluster.namespace, secondPod, {}), generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey),
      /not signed by the cluster's ServiceAccount keys/,
      'a token signed with another key',
    ),
    await refusedWith('bat1.not.a.jwt', /not a ServiceAccount token/, 'no JWT'),
  ];
  // A pod of the namespace that is no bot: a token bound to it names nobody.
  const stranger = await cluster.core.createNamespacedPod({
    namespace: cluster.namespace,
    body: {
      metadata: { name: 'not-a-bot' },
      spec: { automountServiceAccountToken: false, containers: [{ name: 'c', image: TEST_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '600'] }] },
    },
  });
  presented.push(
    await refusedWith(
      await requested({ audiences: ['bot-agent'], boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'not-a-bot', uid: stranger.metadata?.uid } }),
      /a pod that is no bot/,
      "a pod's token without the bot label",
    ),
  );
  // Whole, or the signature alone (a JWT's last part).
  const secrets = [token, second.token, ...presented].flatMap((secret) => [secret, ...secret.split('.').filter((part) => part.length >= 40)]);
  t.false(cluster.logLines.some((line) => secrets.some((secret) => line.includes(secret))), 'a token reached the log');
});

test('address+token: a bot acts with its own token from its own pod; its token from another bot, or no token, is 403', async (t) => {
  const cluster = await onCluster(t);
  const { server, port } = await cluster.agent('address+token');
  const suffix = cluster.namespace.slice(5);
  const [first, second] = await Promise.all([
    provisionedBot(cluster, server, `bot_${process.pid}_3_${suffix}`),
    provisionedBot(cluster, server, `bot_${process.pid}_4_${suffix}`),
  ]);
  const firstId = first.pod.metadata?.labels?.[BOT_LABEL] ?? '';
  const from = (pod: V1Pod, headers: Record<string, string>) =>
    httpFromPod(adminKubeConfig(), cluster.namespace, pod.metadata?.name ?? '', { host: HOST_ADDRESS, port }, { method: 'GET', path: `/api/bots/${firstId}`, headers });
  const own = await from(first.pod, { authorization: `Bot ${first.token}` });
  t.is(own.status, 200, own.raw);
  const borrowed = await from(second.pod, { authorization: `Bot ${first.token}` });
  t.is(borrowed.status, 403);
  t.regex(String(borrowed.body?.msg), /names another bot than the address/);
  const bare = await from(first.pod, {});
  t.is(bare.status, 403);
  t.regex(String(bare.body?.msg), /its address and its token/);
});

test("token behind a mesh's hop: forged tokens that claim a bot's own pod, or a flood of them claiming any pods, never keep that bot or another from its answer", async (t) => {
  const cluster = await onCluster(t);
  const { server } = await cluster.agent('token');
  const id = `bot_${process.pid}_3_${cluster.namespace.slice(5)}`;
  const bot = await provisionedBot(cluster, server, id);
  // Signed with a key of the attacker's, claiming the victim's own pod: refused by the cluster's keys, unreviewed, counted against no one.
  const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const victim = claimsFor(cluster.namespace, bot.pod, {});
  const asBot = (token: string) => call(server, `/api/bots/${id}`, { headers: { authorization: `Bot ${token}` }, from: '127.0.0.6' });
  const refusals: string[] = [];
  for (let i = 0; i < 12; i += 1) {
    const reply = await asBot(jwt({ ...victim, jti: `forged-${i}` }, key));
    refusals.push(`${reply.status} ${String(reply.body?.msg)}`);
  }
  t.deepEqual([...new Set(refusals)], ["403 forbidden: the token is not signed by the cluster's ServiceAccount keys"]);
  // Before, ten refusals counted against the pod they claimed: the victim's next new token was 429 for 30 s.
  const own = await asBot(bot.token);
  t.is(own.status, 200, own.text);
  // 300 forged tokens at once, each claiming a pod of its own, through six hop addresses (this harness bounds each
  // address to 64 connections), and the bot's renewed token among them: before, the forged ones filled the 8
  // reviews and the 64 places waiting, and every new token got 429.
  const fresh = await cluster.core.createNamespacedServiceAccountToken({
    name: 'default',
    namespace: cluster.namespace,
    body: { spec: { audiences: ['bot-agent'], expirationSeconds: 600, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: bot.pod.metadata?.name, uid: bot.pod.metadata?.uid } } },
  });
  const forgedFrom = (i: number) =>
    call(server, `/api/bots/${id}`, {
      headers: { authorization: `Bot ${jwt(claimsFor(cluster.namespace, { metadata: { name: `made-up-${i}`, uid: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}` } }, {}), key)}` },
      from: `127.0.0.${6 + (i % 6)}`,
    });
  const [renewed, ...flood] = await Promise.all([asBot(fresh.status?.token ?? ''), ...Array.from({ length: 300 }, (_, i) => forgedFrom(i))]);
  t.deepEqual([...new Set(flood.map((reply) => reply.status))], [403]);
  t.is(renewed!.status, 200, `the bot's renewed token amid the flood: ${renewed!.text}`);
});
