import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';

// The agent killed with SIGKILL at random moments of Docker deploys (docs/api.md §15): never two runs of a
// bot at once, and once the next agent is up, exactly one, with every deploy settled.
const fixture = new DockerFixture();
const BOTS = 4;
const ROUNDS = Number(process.env.DEPLOY_KILL_ROUNDS ?? 25);

test.before(() => fixture.ready());
test.after.always(() => fixture.cleanup());

const base = (port: number) => `http://127.0.0.1:${port}`;

test(`${BOTS * ROUNDS} deploys cut by SIGKILL at random moments leave exactly one run of each bot, never two`, async (t) => {
  // One test of many rounds: 2 to 3 minutes here, longer than ava's 10 minutes without a test ending on a slow machine.
  t.timeout(30 * 60_000);
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-deploy-kill-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const network = (await fixture.network()).name;
  const env = { AGENT_DATA_DIR: dataDir, AGENT_BOTS_NETWORK: network };
  let agent = await runAgentProcess(env);
  t.teardown(() => agent.process.kill('SIGKILL'));
  const bots = Array.from({ length: BOTS }, () => fixture.newBotId());
  t.teardown(async () => {
    const made = await fixture.docker.listContainers({ all: true, filters: { network: [network], label: [BOT_LABEL] } });
    await Promise.all(made.map((c) => fixture.docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  });
  for (const id of bots) {
    const body = { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'tok-kill', command: ['sh', '-c', IDLE_BOT] };
    const reply = await fetch(`${base(agent.port)}/api/admin/bots`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    t.is(reply.status, 201, await reply.text());
  }

  // Watches the engine the whole time: the most runs of one bot seen at once.
  const runsOf = async (): Promise<Map<string, { running: number; undo: boolean }>> => {
    const listed = await fixture.docker.listContainers({ all: true, filters: { network: [network], label: [BOT_LABEL] } });
    const runs = new Map(bots.map((id) => [id, { running: 0, undo: false }]));
    for (const c of listed) {
      const entry = runs.get(c.Labels[BOT_LABEL] ?? '');
      if (!entry) continue;
      if (c.State === 'running') entry.running += 1;
      if (c.Names.some((name) => name.endsWith('.undo'))) entry.undo = true;
    }
    return runs;
  };
  let most = 0;
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      for (const { running } of (await runsOf()).values()) most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  })();

  const outcomes = new Map<string, number>();
  for (let round = 0; round < ROUNDS; round += 1) {
    // Each bot's deploy begins at its own moment, so that one kill lands in a different step of each.
    const killAfter = 300 + Math.random() * 2_700;
    const deploys = bots.map(async (id) => {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 1_500));
      await fetch(`${base(agent.port)}/api/admin/bots/${id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ env: { ROUND: String(round) }, min_ready_s: 1 }),
      }).catch(() => undefined);
    });
    await new Promise((resolve) => setTimeout(resolve, killAfter));
    agent.process.kill('SIGKILL');
    await Promise.all(deploys);
    agent = await runAgentProcess(env);
    // The next agent settles what the killed one left: one run of each bot, no deploy held.
    const settled = await eventually(async () => [...(await runsOf()).values()].every(({ running, undo }) => running === 1 && !undo), 60_000, 100);
    t.true(settled, `round ${round}: ${JSON.stringify([...(await runsOf()).entries()])}`);
    if (!settled) break;
  }
  watching = false;
  await watcher;
  t.is(most, 1, 'never two runs of one bot at once');
  // No revision is left deploying once its deploy is settled (or judged by the agent before it was killed).
  for (const id of bots) {
    await eventually(async () => {
      const reply = (await (await fetch(`${base(agent.port)}/api/bots/${id}/revisions`)).json()) as { revisions: { outcome: string }[] };
      return reply.revisions.every((revision) => revision.outcome !== 'deploying');
    }, 30_000, 200);
    const { revisions } = (await (await fetch(`${base(agent.port)}/api/bots/${id}/revisions`)).json()) as { revisions: { outcome: string }[] };
    for (const { outcome } of revisions) outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    t.false(revisions.some((revision) => revision.outcome === 'deploying'), `${id}: ${JSON.stringify(revisions.map((revision) => revision.outcome))}`);
  }
  t.log(`outcomes of the last revisions kept: ${JSON.stringify(Object.fromEntries(outcomes))}`);
  t.true((outcomes.get('interrupted') ?? 0) > 0, 'some deploys were cut while judged');
});
