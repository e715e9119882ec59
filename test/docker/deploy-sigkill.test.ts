import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { openStream } from '../helpers/sse-client.js';

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
  // Each revision's outcome is told once, however its deploy was cut (docs/api.md §15).
  for (const id of bots) {
    const stream = await openStream({ port: agent.port }, `/api/bots/${id}/events`, { headers: { 'last-event-id': '0' } });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    stream.close();
    const told = stream.events.filter((event) => event.event === 'deploy-failed' || event.event === 'deploy-succeeded').map((event) => (event.data as { revision?: number }).revision);
    t.is(new Set(told).size, told.length, `${id}: outcomes told ${JSON.stringify(told)}`);
  }
  t.true((outcomes.get('interrupted') ?? 0) > 0, 'some deploys were cut while judged');
});

test('a deploy cut by SIGKILL just after the old run became <id>.undo: the cut revision is interrupted, an earlier failed one is not rewritten, each outcome told once', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-deploy-undo-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const network = (await fixture.network()).name;
  const env = { AGENT_DATA_DIR: dataDir, AGENT_BOTS_NETWORK: network };
  let agent = await runAgentProcess(env);
  t.teardown(() => agent.process.kill('SIGKILL'));
  const id = fixture.newBotId();
  t.teardown(async () => {
    for (const name of [id, `${id}.undo`, `${id}.previous`]) await fixture.docker.getContainer(name).remove({ force: true }).catch(() => undefined);
  });
  const api = (path: string, init: RequestInit = {}) => fetch(`${base(agent.port)}${path}`, { ...init, headers: { 'content-type': 'application/json' } });
  const body = { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'tok-kill', command: ['sh', '-c', IDLE_BOT] };
  t.is((await api('/api/admin/bots', { method: 'POST', body: JSON.stringify(body) })).status, 201);
  const revisions = async () => ((await (await api(`/api/bots/${id}/revisions`)).json()) as { revisions: { revision: number; outcome: string }[] }).revisions;
  const outcomeOf = async (revision: number) => (await revisions()).find((kept) => kept.revision === revision)?.outcome;
  // Revision 2 fails and is rolled back: the bot runs revision 1, and 2 is the newest revision kept.
  const failing = { command: ['sh', '-c', 'echo failing; exit 3'], min_ready_s: 2 };
  t.is((await api(`/api/admin/bots/${id}`, { method: 'PATCH', body: JSON.stringify(failing) })).status, 202);
  t.true(await eventually(async () => (await outcomeOf(2)) === 'failed', 30_000, 200), JSON.stringify(await revisions()));

  // Killed at the engine's rename of the old run to <id>.undo: before the new run is made.
  const events = (await fixture.docker.getEvents({ filters: { type: ['container'], event: ['rename'], label: [`${BOT_LABEL}=${id}`] } })) as NodeJS.ReadableStream;
  const killed = new Promise<void>((resolve) => {
    events.on('data', (chunk: Buffer) => {
      if (!String(chunk).includes(`"name":"${id}.undo"`)) return;
      agent.process.kill('SIGKILL');
      resolve();
    });
  });
  t.teardown(() => (events as NodeJS.ReadableStream & { destroy(): void }).destroy());
  await api(`/api/admin/bots/${id}`, { method: 'PATCH', body: JSON.stringify({ env: { CUT: '1' }, min_ready_s: 1 }) }).catch(() => undefined);
  await killed;
  agent = await runAgentProcess(env);
  const settled = async () => {
    const listed = await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } });
    return listed.filter((c) => c.State === 'running').length === 1 && !listed.some((c) => c.Names.includes(`/${id}.undo`));
  };
  t.true(await eventually(settled, 60_000, 100), 'one run again, no deploy left');
  t.true(await eventually(async () => (await outcomeOf(3)) === 'interrupted', 30_000, 200), JSON.stringify(await revisions()));
  t.is(await outcomeOf(2), 'failed', 'the earlier failed revision is not rewritten');
  t.deepEqual((await revisions()).map((kept) => kept.revision).sort(), [1, 2, 3]);

  // Each outcome told once: read the bot's events from the first.
  const stream = await openStream({ port: agent.port }, `/api/bots/${id}/events`, { headers: { 'last-event-id': '0' } });
  t.teardown(() => stream.close());
  await eventually(() => stream.events.filter((event) => event.event === 'rolled-back').length >= 2, 10_000, 100);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const of = (type: string) => stream.events.filter((event) => event.event === type).map((event) => event.data as Record<string, unknown>);
  t.deepEqual(of('deploy-failed').map((data) => data.revision).sort(), [2, 3], JSON.stringify(of('deploy-failed')));
  t.deepEqual(of('rolled-back').map((data) => [data.from_revision, data.to_revision]).sort(), [[2, 1], [3, 1]], JSON.stringify(of('rolled-back')));
});
