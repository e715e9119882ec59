// A deploy's time on the real engine and on the real cluster (docs/api.md §15), through the agent: with the
// image present, with the image pulled from a real registry on loopback (scripts/registry.sh), and a failing
// revision rolled back. Medians of a few rounds each, from the PATCH: until its 202 (the new run started) and
// until it was judged (min_ready_s 1) or the old run ran again. The cluster is brought up when it is not
// running (built once, then cached) and taken down again after.
// Prints the figures and writes them into BENCHMARKS.md between its markers (npm run bench runs it last).
// Run as root, with the engine up: npm run bench:deploys
import { execFileSync } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { pino } from 'pino';
import { assembleAgent } from '../src/agent.js';
import type { Agent } from '../src/agent.js';
import { listen } from '../src/http/listen.js';
import { createDockerDriver } from '../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../src/runtime/docker/docker-provisioner.js';
import { createKubernetesDriver } from '../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../src/runtime/kubernetes/kube-provisioner.js';
import { TEST_APP_CONFIG } from '../test/helpers/agent.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { pushedImage, REGISTRY_LOGIN, testRegistry } from '../test/helpers/registry.js';
import { clusterHarness } from '../test/kube-cluster/cluster-harness.js';
import { clusterRunning } from './bench-kube.js';
import { writeSection } from './bench-sections.js';

const ROUNDS = 5;
const KUBE_ROUNDS = 3;
const fixture = new DockerFixture();
/** A bot that ends at once on SIGTERM: a deploy waits for the old run to be gone. */
const QUICK_TO_STOP = 'trap "exit 0" TERM; while :; do sleep 1; done';
type Medians = Record<string, { answered: number; ended: number }>;

const median = (values: number[]): number => Math.round([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0);

/** An agent over `made` on loopback, and JSON calls to it. */
async function served(made: Agent): Promise<{ server: Server; json: (path: string, method: string, body?: unknown) => Promise<{ status: number; body: Record<string, unknown> }> }> {
  const server = await listen(made.app, '127.0.0.1', 0);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const json = async (path: string, method: string, body?: unknown) => {
    const reply = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
  };
  return { server, json };
}

/** `rounds` of each kind of deploy of a bot made with `create`; the medians (ms) until the 202 and until judged. */
async function measure(made: Agent, create: Record<string, unknown>, rounds: number, crash: string[]): Promise<Medians> {
  const { server, json } = await served(made);
  const botId = String(create.bot_id);
  try {
    const created = await json('/api/admin/bots', 'POST', create);
    if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
    /** One deploy: ms to its 202, and to its outcome. */
    const deploy = async (body: Record<string, unknown>, outcome: string): Promise<{ answered: number; ended: number }> => {
      const began = performance.now();
      const reply = await json(`/api/admin/bots/${botId}`, 'PATCH', body);
      const answered = performance.now() - began;
      if (reply.status !== 202) throw new Error(`deploy: ${JSON.stringify(reply.body)}`);
      for (;;) {
        const { body: listed } = await json(`/api/bots/${botId}/revisions`, 'GET');
        const latest = (listed.revisions as { revision: number; outcome: string }[]).find((r) => r.revision === reply.body.revision);
        if (latest && latest.outcome !== 'deploying') {
          if (latest.outcome !== outcome) throw new Error(`revision ${latest.revision} ${latest.outcome}, not ${outcome}`);
          return { answered, ended: performance.now() - began };
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const kinds: Record<string, { answered: number[]; ended: number[] }> = { present: { answered: [], ended: [] }, pulled: { answered: [], ended: [] }, 'rolled back': { answered: [], ended: [] } };
    const note = (kind: string, { answered, ended }: { answered: number; ended: number }) => {
      kinds[kind]!.answered.push(answered);
      kinds[kind]!.ended.push(ended);
    };
    for (let round = 0; round < rounds; round += 1) {
      note('present', await deploy({ env: { ROUND: String(round) }, min_ready_s: 1 }, 'succeeded'));
      const image = await pushedImage(fixture.docker, 'bench-deploy');
      note('pulled', await deploy({ image, min_ready_s: 1, registry_auth: REGISTRY_LOGIN }, 'succeeded'));
      note('rolled back', await deploy({ command: crash, min_ready_s: 1 }, 'failed'));
    }
    await json(`/api/admin/bots/${botId}`, 'DELETE');
    return Object.fromEntries(Object.entries(kinds).map(([kind, { answered, ended }]) => [kind, { answered: median(answered), ended: median(ended) }]));
  } finally {
    server.close();
    await made.close();
  }
}

/** The same deploys on the real cluster, through an agent with the chart's ServiceAccount. */
async function onCluster(): Promise<Medians> {
  const wasRunning = clusterRunning();
  try {
    const up = execFileSync('bash', ['scripts/kube/up.sh'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    process.env.BOT_AGENT_KUBECONFIG = up.trim().split('\n').at(-1);
    const image = 'bot-agent-testbot:bench-deploys';
    await fixture.docker.getImage(TEST_IMAGE).tag({ repo: 'bot-agent-testbot', tag: 'bench-deploys' });
    execFileSync('bash', ['scripts/kube/images.sh', image], { stdio: 'ignore' });
    const { harness, namespace, agentConfig } = await clusterHarness();
    try {
      const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace });
      const made = assembleAgent({
        driver,
        provisioner: createKubernetesProvisioner({ kubeConfig: agentConfig, namespace, agentUrl: 'http://agent:8000' }),
        config: { ...TEST_APP_CONFIG, rateLimit: 10_000 },
        logger: pino({ level: 'silent' }),
        watchdog: 'off',
        statsSamples: 'off',
      });
      const create = { bot_id: harness.newBotId(), user_id: 'user_1', image, template: 'bench', token: 'tok-bench', command: ['sh', '-c', QUICK_TO_STOP] };
      return await measure(made, create, KUBE_ROUNDS, ['sh', '-c', 'exit 3']);
    } finally {
      await harness.close();
    }
  } finally {
    if (!wasRunning) execFileSync('bash', ['scripts/kube/down.sh'], { stdio: 'ignore' });
  }
}

async function main(): Promise<void> {
  process.env.BOT_AGENT_REGISTRY ??= execFileSync('bash', ['scripts/registry.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1);
  await fixture.ready();
  const network = (await fixture.network()).name;
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  const made = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network, agentUrl: 'http://agent:8000', registries: [testRegistry(), 'docker.io'] }),
    config: { ...TEST_APP_CONFIG, rateLimit: 10_000 },
    logger: pino({ level: 'silent' }),
    watchdog: 'off',
    statsSamples: 'off',
  });
  let docker: Medians;
  try {
    docker = await measure(made, { bot_id: fixture.newBotId(), user_id: 'user_1', image: TEST_IMAGE, template: 'bench', token: 'tok-bench', command: ['sh', '-c', IDLE_BOT] }, ROUNDS, ['sh', '-c', 'exit 3']);
  } finally {
    await driver.close();
    await fixture.cleanup();
  }
  const kube = await onCluster();
  const rows = Object.keys(docker).map((kind) => `| ${kind} | ${docker[kind]!.answered} | ${docker[kind]!.ended} | ${kube[kind]?.answered ?? '-'} | ${kube[kind]?.ended ?? '-'} |`);
  const body = [
    '## Deploys',
    '',
    `A bot's deploy through the agent, medians (ms) of ${ROUNDS} on the real engine and ${KUBE_ROUNDS} on the real cluster: until the PATCH's 202 (the old run stopped, the new one started; on Docker a pull first where the image is new, on Kubernetes the kubelet's pull after the old pod is gone), and until the revision was judged with \`min_ready_s: 1\` (succeeded), or failed and the old run ran again (rolled back: its run exits at once; on Kubernetes, until the Deployment was set back, its pod starting after). The pulled image is a new tag in Distribution's registry on loopback whose layer (busybox's 4 MB) the engine or containerd may hold already: the pull is mostly the registry's round trips, not a download. On Kubernetes the bot ends at once on SIGTERM (a Recreate rollout waits for the old pod to be gone; a bot that ignores SIGTERM adds its grace period, 30 s by default).`,
    '',
    '| deploy | Docker: until 202 | Docker: until judged | Kubernetes: until 202 | Kubernetes: until judged |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  console.log(writeSection('deploys', body));
}

await main();
