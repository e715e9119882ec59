// A deploy's time on the real engine (docs/api.md §15), through the agent: with the image on the engine,
// with the image pulled from a real registry on loopback (scripts/registry.sh), and a failing revision
// rolled back. Medians of a few rounds each, from the PATCH: until its 202 (the new run started) and
// until it was judged (min_ready_s 1) or the old run ran again. Kubernetes has no deploys yet.
// Prints the figures and writes them into BENCHMARKS.md between its markers (npm run bench runs it last).
// Run as root, with the engine up: npm run bench:deploys
import { execFileSync } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { assembleAgent } from '../src/agent.js';
import { listen } from '../src/http/listen.js';
import { createDockerDriver } from '../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../src/runtime/docker/docker-provisioner.js';
import { TEST_APP_CONFIG } from '../test/helpers/agent.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { pushedImage, REGISTRY_LOGIN } from '../test/helpers/registry.js';
import { writeSection } from './bench-sections.js';

const ROUNDS = 5;
const fixture = new DockerFixture();

const median = (values: number[]): number => Math.round([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0);

async function main(): Promise<void> {
  process.env.BOT_AGENT_REGISTRY ??= execFileSync('bash', ['scripts/registry.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1);
  await fixture.ready();
  const network = (await fixture.network()).name;
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  const made = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network, agentUrl: 'http://agent:8000' }),
    config: { ...TEST_APP_CONFIG, rateLimit: 10_000 },
    logger: pino({ level: 'silent' }),
    watchdog: 'off',
    statsSamples: 'off',
  });
  const server = await listen(made.app, '127.0.0.1', 0);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const json = async (path: string, method: string, body?: unknown) => {
    const reply = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
  };
  const botId = fixture.newBotId();
  const created = await json('/api/admin/bots', 'POST', { bot_id: botId, user_id: 'user_1', image: TEST_IMAGE, template: 'bench', token: 'tok-bench', command: ['sh', '-c', IDLE_BOT] });
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
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      note('present', await deploy({ env: { ROUND: String(round) }, min_ready_s: 1 }, 'succeeded'));
      const image = await pushedImage(fixture.docker, 'bench-deploy');
      note('pulled', await deploy({ image, min_ready_s: 1, registry_auth: REGISTRY_LOGIN }, 'succeeded'));
      note('rolled back', await deploy({ command: ['sh', '-c', 'exit 3'], min_ready_s: 1 }, 'failed'));
    }
  } finally {
    server.close();
    await made.close();
    await driver.close();
    for (const name of [botId, `${botId}.undo`, `${botId}.previous`]) await fixture.docker.getContainer(name).remove({ force: true }).catch(() => undefined);
    await fixture.cleanup();
  }
  const rows = Object.entries(kinds).map(([kind, { answered, ended }]) => `| ${kind} | ${median(answered)} | ${median(ended)} |`);
  const body = [
    '## Deploys (Docker)',
    '',
    `A bot's deploy through the agent on the real engine, medians of ${ROUNDS} (ms): until the PATCH's 202 (the old run stopped, the new one started; a pull first where the image is new), and until the revision was judged with \`min_ready_s: 1\` (succeeded), or failed and the old run ran again (rolled back: its run exits at once). The pulled image is a new tag in Distribution's registry on loopback whose layer (busybox's 4 MB) the engine holds already: the pull is the registry's round trips, not a download. Kubernetes has no deploys yet.`,
    '',
    '| deploy | until 202 | until judged |',
    '|---|---|---|',
    ...rows,
  ].join('\n');
  console.log(writeSection('deploys', body));
}

await main();
