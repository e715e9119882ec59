import test from 'ava';
import type { ExecutionContext } from 'ava';
import { pino } from 'pino';
import { BOT_LABEL, GENERATION_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT } from '../helpers/docker-fixture.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { pushedImage, REGISTRY_LOGIN, testRegistry } from '../helpers/registry.js';
import { openStream } from '../helpers/sse-client.js';
import type { EventStream } from '../helpers/sse-client.js';

// Deploys on the real engine (docs/api.md §15): a new revision replaces the run, is judged on its uptime and
// health, and is kept or undone; never two runs of a bot at once.
const fixture = new DockerFixture();
const logLines: string[] = [];
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address', { logger: pino(lineSink(logLines)), pulls: { registries: [testRegistry()] } });
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

interface Revision {
  revision: number;
  outcome: string;
  reason: string | null;
  spec: Record<string, unknown>;
  by: string;
}

/** Containers of the bot (its runs, kept or not), by name, with whether each runs. */
async function runsOf(botId: string): Promise<{ name: string; running: boolean; id: string; image: string }[]> {
  const listed = await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${botId}`] } });
  return listed.map((c) => ({ name: c.Names[0]?.slice(1) ?? '', running: c.State === 'running', id: c.Id, image: c.Image }));
}

/** A bot made through the API, idle and quick to stop, with its events followed from before any deploy. */
async function newBot(t: ExecutionContext): Promise<{ id: string; events: EventStream; containerId: string }> {
  const id = await createdIdleBot(t, fixture, agent.server, { token: 'tok-deploys', env: { MODE: 'one' } });
  const events = await openStream(agent.server, `/api/bots/${id}/events`);
  t.teardown(() => events.close());
  return { id, events, containerId: (await fixture.docker.getContainer(id).inspect()).Id };
}

const deploy = (botId: string, body: Record<string, unknown>) => call(agent.server, `/api/admin/bots/${botId}`, { method: 'PATCH', body });

async function revisions(botId: string): Promise<Revision[]> {
  const reply = await call(agent.server, `/api/bots/${botId}/revisions`);
  return (reply.body?.revisions ?? []) as Revision[];
}

/** Waits until the revision has an outcome other than `deploying`, and answers it. */
async function judged(botId: string, revision: number): Promise<Revision | undefined> {
  let found: Revision | undefined;
  await eventually(async () => {
    found = (await revisions(botId)).find((r) => r.revision === revision);
    return found !== undefined && found.outcome !== 'deploying';
  }, 60_000, 200);
  // What the agent reported meanwhile, where the verdict never came.
  if (found?.outcome === 'deploying') console.error(logLines.filter((line) => line.includes(botId)).join('\n'));
  return found;
}

/** Samples the bot's running containers until `done` settles: the most seen running at once. */
async function mostRunningWhile(botId: string, done: Promise<unknown>): Promise<number> {
  let most = 0;
  let finished = false;
  void done.finally(() => (finished = true));
  while (!finished) {
    most = Math.max(most, (await runsOf(botId)).filter((run) => run.running).length);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return most;
}

test('a good image deploys: the bot keeps its id, token and history, and never runs twice; the old run is kept stopped', async (t) => {
  const { id, events } = await newBot(t);
  // A run ended before the deploy: its record is the bot's history, which the deploy keeps.
  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  await eventually(async () => ((await call(agent.server, `/api/bots/${id}/exits`)).body?.exits as unknown[]).length > 0);
  const before = await fixture.docker.getContainer(id).inspect();
  const containerId = before.Id;
  const image = await pushedImage(fixture.docker, 'deploy-good');
  const reply = await deploy(id, { image, env: { MODE: 'two' }, min_ready_s: 2, registry_auth: REGISTRY_LOGIN });
  t.is(reply.status, 202, reply.text);
  t.like(reply.body, { ok: true, revision: 2 });
  const result = judged(id, 2);
  t.is(await mostRunningWhile(id, result), 1, 'never two runs at once');
  t.like(await result, { outcome: 'succeeded', by: 'platform', reason: null });
  const after = await fixture.docker.getContainer(id).inspect();
  t.not(after.Id, containerId);
  t.is(after.Config.Image, image);
  t.true(after.State.Running);
  t.is(after.Config.Labels[GENERATION_LABEL], before.Config.Labels[GENERATION_LABEL], 'the same generation: its token still names it');
  const tokenOf = (env: string[] | undefined) => env?.find((entry) => entry.startsWith('BOT_TOKEN='));
  t.is(tokenOf(after.Config.Env), tokenOf(before.Config.Env));
  t.true(after.Config.Env?.includes('MODE=two'));
  t.deepEqual(after.Config.Cmd, ['sh', '-c', IDLE_BOT], 'what the update left out stays');
  t.deepEqual(
    (await runsOf(id)).map(({ name, running }) => ({ name, running })).sort((a, b) => a.name.localeCompare(b.name)),
    [
      { name: id, running: true },
      { name: `${id}.previous`, running: false },
    ],
  );
  await events.next((e) => e.event === 'deploy-started' && e.data.revision === 2);
  await events.next((e) => e.event === 'deploy-succeeded' && e.data.revision === 2);
  // Its history goes on: the run ended before the deploy is still in its records.
  const exits = await call(agent.server, `/api/bots/${id}/exits`);
  t.true((exits.body?.exits as { requested: boolean }[]).some((exit) => exit.requested));
  t.is((await call(agent.server, `/api/bots/${id}`)).status, 200);
  const listed = (await revisions(id))[0];
  t.like(listed?.spec, { image, env: ['MODE'] });
  t.false(JSON.stringify(await revisions(id)).includes('tok-deploys'), 'no secret in a revision');
});

test('a crashing revision fails, is undone, and the old run runs again; its last lines are in deploy-failed', async (t) => {
  const { id, events, containerId } = await newBot(t);
  const reply = await deploy(id, { command: ['sh', '-c', 'echo boom before the crash; sleep 1; exit 3'], min_ready_s: 5 });
  t.is(reply.status, 202, reply.text);
  const result = judged(id, 2);
  t.is(await mostRunningWhile(id, result), 1);
  t.like(await result, { outcome: 'failed', reason: 'its run exited with code 3' });
  const failed = await events.next((e) => e.event === 'deploy-failed');
  t.like(failed.data, { revision: 2, rolled_back: true });
  t.regex(String(failed.data.logs), /boom before the crash/);
  t.true(String(failed.data.logs).length < 1_000);
  await events.next((e) => e.event === 'rolled-back' && e.data.to_revision === 1 && e.data.by === 'agent');
  const now = await fixture.docker.getContainer(id).inspect();
  t.is(now.Id, containerId, 'the old run itself');
  t.true(now.State.Running);
  t.deepEqual((await runsOf(id)).map((run) => run.name), [id], 'the failed run is gone');
  // Each run that ended has its record (docs/api.md §8): the old run's, stopped by the deploy, on request; the
  // failed run's, which exited by itself, not on request and with its lines.
  const exitsOf = async () => (await call(agent.server, `/api/bots/${id}/exits?limit=50`)).body?.exits as { requested: boolean; exit_code: number | null; logs: string }[];
  t.true(await eventually(async () => (await exitsOf()).length >= 2, 15_000, 200), JSON.stringify(await exitsOf()));
  const exits = await exitsOf();
  // Newest first: the failed run's first end is the oldest of code 3 (the engine may have started it once more, and the undo stopped that).
  const failedRun = exits.filter((exit) => exit.exit_code === 3).at(-1);
  t.like(failedRun, { requested: false }, JSON.stringify(exits));
  t.regex(String(failedRun?.logs), /boom before the crash/);
  t.true(exits.some((exit) => exit.requested && exit.exit_code !== 3), `the old run's end, stopped by the deploy: ${JSON.stringify(exits)}`);
});

test('a revision whose check fails, or that is not ready by its deadline, is undone', async (t) => {
  const { id, containerId } = await newBot(t);
  t.is((await deploy(id, { health: { exec: ['false'], interval_s: 1, retries: 1 }, min_ready_s: 30 })).status, 202);
  t.like(await judged(id, 2), { outcome: 'failed', reason: 'its health check failed' });
  t.is((await fixture.docker.getContainer(id).inspect()).Id, containerId);
  t.is((await deploy(id, { min_ready_s: 60, deadline_s: 5 })).status, 202);
  t.like(await judged(id, 3), { outcome: 'failed', reason: 'it was not up for 60 s within 5 s (deadline_s)' });
  const now = await fixture.docker.getContainer(id).inspect();
  t.is(now.Id, containerId);
  t.true(now.State.Running);
});

test('a missing tag, or a login the registry refuses, fails before anything stops: the bot runs on as it was', async (t) => {
  const { id, containerId } = await newBot(t);
  const image = await pushedImage(fixture.docker, 'deploy-refused');
  for (const [body, status] of [
    [{ image: image.replace(/:v1$/, ':no-such-tag'), registry_auth: REGISTRY_LOGIN }, 422],
    [{ image, registry_auth: { username: 'botagent', password: 'wrong-password-0123' } }, 403],
  ] as const) {
    const reply = await deploy(id, body);
    t.is(reply.status, status, reply.text);
    const now = await fixture.docker.getContainer(id).inspect();
    t.is(now.Id, containerId);
    t.true(now.State.Running);
  }
  // Neither took a revision number (docs/api.md §15).
  t.deepEqual(
    (await revisions(id)).map((r) => r.revision),
    [1],
  );
  t.false(logLines.some((line) => line.includes('wrong-password-0123')));
});

// Revision 1 is judged as a deploy's run is (docs/api.md §15): a bot that never stayed up does not say it succeeded.
test('a new bot whose first run exits at once has revision 1 failed, with its lines in a deploy-failed event; one that stays up succeeds', async (t) => {
  const failing = await createdIdleBot(t, fixture, agent.server, { command: ['sh', '-c', 'echo cannot-start-without-config; exit 3'] });
  const events = await openStream(agent.server, `/api/bots/${failing}/events`, { headers: { 'last-event-id': '0' } });
  t.teardown(() => events.close());
  const staying = await createdIdleBot(t, fixture, agent.server);
  t.like(await judged(failing, 1), { outcome: 'failed', reason: 'its run exited with code 3' });
  const failed = await events.next((event) => event.event === 'deploy-failed', 10_000);
  t.like(failed?.data, { revision: 1, rolled_back: false });
  t.regex(String(failed?.data.logs), /cannot-start-without-config/);
  t.like(await judged(staying, 1), { outcome: 'succeeded', reason: null });
  t.true((await fixture.docker.getContainer(staying).inspect()).State.Running);
});

test('a rollback goes back to the previous revision, and a second forward again; none without one', async (t) => {
  const { id, containerId } = await newBot(t);
  const none = await call(agent.server, `/api/admin/bots/${id}/rollback`, { method: 'POST' });
  t.is(none.status, 404);
  t.regex(String(none.body?.msg), /^no previous revision/);
  t.is((await deploy(id, { env: { MODE: 'two' }, min_ready_s: 1 })).status, 202);
  t.like(await judged(id, 2), { outcome: 'succeeded' });
  const deployed = (await fixture.docker.getContainer(id).inspect()).Id;
  const back = await call(agent.server, `/api/admin/bots/${id}/rollback`, { method: 'POST' });
  t.is(back.status, 200, back.text);
  t.like(back.body, { ok: true, revision: 1 });
  const now = await fixture.docker.getContainer(id).inspect();
  t.is(now.Id, containerId);
  t.true(now.State.Running);
  t.like((await revisions(id)).find((r) => r.revision === 2), { outcome: 'rolled-back' });
  const forward = await call(agent.server, `/api/admin/bots/${id}/rollback`, { method: 'POST' });
  t.like(forward.body, { ok: true, revision: 2 });
  t.is((await fixture.docker.getContainer(id).inspect()).Id, deployed);
  t.is((await runsOf(id)).filter((run) => run.running).length, 1);
});

test('while a deploy holds the bot, another deploy and its lifecycle operations are 409 deploy in progress', async (t) => {
  const { id } = await newBot(t);
  t.is((await deploy(id, { min_ready_s: 4 })).status, 202);
  const again = await deploy(id, {});
  t.is(again.status, 409);
  t.regex(String(again.body?.msg), /^deploy in progress: bot /);
  const restart = await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } });
  t.is(restart.status, 409);
  t.regex(String(restart.body?.msg), /^deploy in progress/);
  t.like(await judged(id, 2), { outcome: 'succeeded' });
  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
});

test('a deploy of a bot that does not exist is 404; bad input is 400', async (t) => {
  t.is((await deploy('bot_1_1_nobody', {})).status, 404);
  for (const body of [{ min_ready_s: -1 }, { deadline_s: 4 }, { rollback: 'yes' }, { image: 'Bad Image' }, { env: { BOT_TOKEN: 'x' } }]) {
    const reply = await deploy(fixture.newBotId(), body);
    t.is(reply.status, 400, JSON.stringify(body));
  }
});

test('a failed revision that writes long lines: deploy-failed keeps only the newest that fit in 64 KiB as JSON', async (t) => {
  const { id, events } = await newBot(t);
  // 20 lines of 40,000 quote marks: 800,000 bytes as written, twice that as JSON.
  const reply = await deploy(id, { command: ['sh', '-c', 'i=0; while [ $i -lt 20 ]; do head -c 40000 /dev/zero | tr "\\0" "\\""; echo; i=$((i+1)); done; exit 4'], min_ready_s: 5 });
  t.is(reply.status, 202, reply.text);
  t.like(await judged(id, 2), { outcome: 'failed', reason: 'its run exited with code 4' });
  const failed = await events.next((e) => e.event === 'deploy-failed');
  const logs = String(failed.data.logs);
  t.true(Buffer.byteLength(JSON.stringify(logs)) - 2 <= 64 * 1024, `${Buffer.byteLength(JSON.stringify(logs))} bytes as JSON`);
  t.regex(logs, /^"+$/m);
});
