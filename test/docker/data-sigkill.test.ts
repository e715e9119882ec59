import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { BOT_LABEL, RESTORE_OF_LABEL, RESTORE_STEP_LABEL } from '../../src/runtime/labels.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { killAtEngineEvent } from '../helpers/engine-events.js';
import { eventually } from '../helpers/eventually.js';

// A real SIGKILL of the agent (src/main.ts, its own process) in the middle of a bot's backup and of its restore
// (docs/api.md §20): started again on the same folder, the agent leaves the bot running once, with its data whole
// (all of it as it was, or all of it as the backup had it, never a mix), and no half-made backup listed.
const fixture = new DockerFixture();

test.before(async () => {
  await fixture.ready();
});

test.after.always(async () => {
  await fixture.cleanup();
});

/** Forty files of 256 KiB, each naming the data's version: a copy cut short or a mix shows as two versions. */
const FILES = 40;
const write = (version: string) => `for i in $(seq ${FILES}); do { echo ${version}; head -c 262144 /dev/zero; } > /data/part-$i; done; echo ${version} > /data/version`;

type Agent = Awaited<ReturnType<typeof runAgentProcess>>;

async function agentOn(dataDir: string): Promise<Agent> {
  return runAgentProcess({ AGENT_DATA_DIR: dataDir });
}

async function json(agent: Agent, path: string, method = 'GET', body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const reply = await fetch(`http://127.0.0.1:${agent.port}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
}

/** A bot with a data folder, made through the agent, holding version `a` of its data. */
async function botWithData(t: ExecutionContext, agent: Agent): Promise<string> {
  const id = fixture.newBotId();
  t.teardown(async () => {
    for (const container of await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })) {
      await fixture.docker.getContainer(container.Id).remove({ force: true }).catch(() => undefined);
    }
    for (const volume of (await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } })).Volumes ?? []) {
      await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
    }
  });
  const made = await json(agent, '/api/admin/bots', 'POST', { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-sigkill', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/data' }] });
  t.is(made.status, 201, JSON.stringify(made.body));
  await sh(id, write('a'));
  return id;
}

async function sh(id: string, script: string): Promise<string> {
  return (await fixture.exec({ id, container: fixture.docker.getContainer(id) }, script)).trim();
}

/** The versions the bot's data files name: one when whole. */
async function versions(id: string): Promise<string[]> {
  return [...new Set((await sh(id, `for f in /data/version /data/part-*; do head -n 1 "$f"; done`)).split('\n'))].sort();
}

/** How many containers of the bot run now, whatever their names. */
async function runningCopies(id: string): Promise<number> {
  return (await fixture.docker.listContainers({ filters: { label: [`${BOT_LABEL}=${id}`] } })).length;
}

/** SIGKILLs the agent as soon as the engine says the bot's container did `action` (its stop: `die`), and answers then. */
function killAt(agent: Agent, id: string, action: string): Promise<void> {
  return killAtEngineEvent(fixture.docker, action, [`${BOT_LABEL}=${id}`], agent.process);
}

/** The agent's backups of the bot, each verified: a half-made one would be listed as unreadable. */
async function backupsVerified(agent: Agent, id: string): Promise<{ id: string; ok: boolean }[]> {
  const listed = ((await json(agent, `/api/admin/bots/${id}/backups`)).body.backups ?? []) as { id: string }[];
  const checked: { id: string; ok: boolean }[] = [];
  for (const backup of listed) {
    const verified = await json(agent, `/api/admin/bots/${id}/backups/${backup.id}/verify`, 'POST');
    checked.push({ id: backup.id, ok: verified.status === 200 && (verified.body.backup as { verification?: { ok: boolean } }).verification?.ok === true });
  }
  return checked;
}

test('SIGKILL while a backup in stop mode holds the bot stopped: the next agent starts it, once, its data whole; no half backup is listed', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-sigkill-backup-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const first = await agentOn(dataDir);
  t.teardown(() => first.process.kill('SIGKILL'));
  const id = await botWithData(t, first);

  const killed = killAt(first, id, 'die');
  const asked = json(first, `/api/admin/bots/${id}/backups`, 'POST', { mode: 'stop' }).catch(() => undefined);
  await killed;
  t.is(await asked, undefined, 'the agent was killed before it answered');
  t.false((await fixture.docker.getContainer(id).inspect()).State.Running, 'killed while the bot was stopped');

  const next = await agentOn(dataDir);
  t.teardown(() => next.process.kill('SIGKILL'));
  t.true(await eventually(async () => (await fixture.docker.getContainer(id).inspect()).State.Running, 30_000, 200), 'the next agent started the bot again');
  t.is(await runningCopies(id), 1);
  t.deepEqual(await versions(id), ['a']);
  t.true((await backupsVerified(next, id)).every((backup) => backup.ok), 'every backup listed reads back whole');
  // The bot's backups go on: a new one is made, listed and whole.
  const made = await json(next, `/api/admin/bots/${id}/backups`, 'POST', { mode: 'stop' });
  t.is(made.status, 201, JSON.stringify(made.body));
  t.true((await backupsVerified(next, id)).every((backup) => backup.ok));
});

test("SIGKILL during a restore, at the bot's stop and at the swap's start: the next agent leaves it running once, with all its data as it was or all as the backup had it", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-sigkill-restore-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  let agent = await agentOn(dataDir);
  t.teardown(() => agent.process.kill('SIGKILL'));
  const id = await botWithData(t, agent);
  const made = await json(agent, `/api/admin/bots/${id}/backups`, 'POST', { mode: 'live' });
  t.is(made.status, 201, JSON.stringify(made.body));
  const backupId = (made.body.backup as { id: string }).id;

  const found: string[][] = [];
  // At the bot's stop (before the swap), then once the engine runs the swap's helper.
  for (const [round, cut] of [
    ['b', () => killAt(agent, id, 'die')],
    ['c', () => killAtEngineEvent(fixture.docker, 'start', [`${RESTORE_OF_LABEL}=${id}`, `${RESTORE_STEP_LABEL}=swap`], agent.process)],
  ] as const) {
    await sh(id, write(round));
    const killed = cut();
    const asked = json(agent, `/api/admin/bots/${id}/backups/${backupId}/restore`, 'POST').catch(() => undefined);
    await killed;
    t.is(await asked, undefined, `round ${round}: the agent was killed before it answered`);
    agent = await agentOn(dataDir);
    t.true(await eventually(async () => (await fixture.docker.getContainer(id).inspect().catch(() => undefined))?.State.Running === true, 60_000, 200), `round ${round}: running again`);
    t.true(await eventually(async () => (await fixture.docker.listContainers({ all: true, filters: { label: [`${RESTORE_OF_LABEL}=${id}`] } })).length === 0, 60_000, 200), `round ${round}: the restore's helpers gone`);
    t.is(await runningCopies(id), 1, `round ${round}`);
    const seen = await versions(id);
    found.push(seen);
    t.true(seen.length === 1 && ['a', round].includes(seen[0]!), `round ${round}: ${seen.join(', ')}`);
  }
  t.log(`the data after each cut: ${found.map((seen) => seen.join('')).join(', ')}`);
  // Cut once the swap ran, the restore was carried to its end: the backup's data.
  t.deepEqual(found[1], ['a']);
});
