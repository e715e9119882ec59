import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// Backups of a bot's data to the agent's backup folder (docs/api.md §20), on the real engine: read through its
// archive API, the bot stopped for them or not, listed whole or not at all.
const fixture = new DockerFixture();
const backupDir = mkdtempSync(join(tmpdir(), 'bot-agent-backups-'));
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address', { config: { backupDir } });
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
  rmSync(backupDir, { recursive: true, force: true });
});

/** Each start of the bot adds one to the count in its data folder, then it idles. */
const COUNTER = `n=$(cat /data/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/count; ${IDLE_BOT}`;

function cleanedUp(t: ExecutionContext, id: string): void {
  t.teardown(async () => {
    await fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined);
    const listed = await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } });
    for (const volume of listed.Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
  });
}

async function madeWithData(t: ExecutionContext): Promise<string> {
  const id = fixture.newBotId();
  cleanedUp(t, id);
  const made = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', COUNTER], data: [{ path: '/data' }] },
  });
  t.is(made.status, 201, made.text);
  t.true(await eventually(async () => (await readData(id, 'count').catch(() => '')) === '1', 30_000, 200), 'the bot counted its first start');
  return id;
}

async function readData(botId: string, file: string): Promise<string> {
  return (await fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, `cat /data/${file} 2>/dev/null`)).trim();
}

interface BackupAnswer {
  id: string;
  mode: string;
  downtime_ms: number | null;
  size_bytes: number;
  folders: { path: string; size_bytes: number; sha256: string }[];
}

const archiveUrl = (botId: string, backupId: string, folder: string) => {
  const { port } = agent.server.address() as { port: number };
  return `http://127.0.0.1:${port}/api/admin/bots/${botId}/backups/${backupId}/archive?folder=${encodeURIComponent(folder)}`;
};

/** One file of a downloaded archive, read with the system's own tar. */
function fileInArchive(archive: Buffer, entry: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'bot-agent-archive-'));
  try {
    writeFileSync(join(dir, 'a.tar.gz'), archive);
    return execFileSync('tar', ['-xzOf', join(dir, 'a.tar.gz'), entry], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a backup in stop mode stops the bot, copies its data folder and starts it again; its archive downloads as kept, checksum and all", async (t) => {
  const id = await madeWithData(t);
  await fixture.exec({ id, container: fixture.docker.getContainer(id) }, 'echo hello > /data/greeting');
  const startedBefore = (await fixture.docker.getContainer(id).inspect()).State.StartedAt;

  const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: {} });
  t.is(made.status, 201, made.text);
  const backup = made.body?.backup as BackupAnswer;
  t.is(backup.mode, 'stop');
  t.true(typeof backup.downtime_ms === 'number' && backup.downtime_ms > 0, `downtime ${backup.downtime_ms}`);
  t.deepEqual(backup.folders.map((folder) => folder.path), ['/data']);
  // Started again: a new run, which counted its start over the same data.
  const after = (await fixture.docker.getContainer(id).inspect()).State;
  t.true(after.Running, 'the bot runs again after its backup');
  t.not(after.StartedAt, startedBefore);
  t.true(await eventually(async () => (await readData(id, 'count').catch(() => '')) === '2', 30_000, 200), 'the data was there for the next run');

  const listed = await call(agent.server, `/api/admin/bots/${id}/backups`);
  t.is(listed.status, 200, listed.text);
  t.deepEqual((listed.body?.backups as BackupAnswer[]).map((kept) => kept.id), [backup.id]);

  const download = await fetch(archiveUrl(id, backup.id, '/data'));
  t.is(download.status, 200);
  t.is(download.headers.get('content-type'), 'application/gzip');
  const bytes = Buffer.from(await download.arrayBuffer());
  const [kept] = backup.folders;
  t.is(bytes.length, kept!.size_bytes);
  t.is(createHash('sha256').update(bytes).digest('hex'), kept!.sha256);
  t.is(download.headers.get('x-content-sha256'), kept!.sha256);
  t.is(fileInArchive(bytes, 'data/greeting'), 'hello\n');
  t.is(fileInArchive(bytes, 'data/count'), '1\n', 'copied while the bot was stopped, before its next start counted');

  const missing = await fetch(archiveUrl(id, backup.id, '/elsewhere'));
  t.is(missing.status, 404);
  t.like(await missing.json(), { ok: false });

  const removed = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}`, { method: 'DELETE' });
  t.is(removed.status, 200, removed.text);
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}`)).status, 404);
  t.deepEqual((await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups, []);
});

test('a live backup copies the running bot without stopping it; a bot without data and a bad mode are refused', async (t) => {
  const id = await madeWithData(t);
  const startedBefore = (await fixture.docker.getContainer(id).inspect()).State.StartedAt;
  const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live' } });
  t.is(made.status, 201, made.text);
  t.like(made.body?.backup, { mode: 'live', downtime_ms: null });
  t.is((await fixture.docker.getContainer(id).inspect()).State.StartedAt, startedBefore, 'not restarted');

  const bare = await fixture.runBot();
  const none = await call(agent.server, `/api/admin/bots/${bare.id}/backups`, { body: {} });
  t.is(none.status, 422, none.text);
  t.regex(String(none.body?.msg), /no data folders/);
  const badMode = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'snapshot' } });
  t.is(badMode.status, 400, badMode.text);
  t.is(badMode.body?.msg, 'mode must be stop, live or pre');
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/bak_nope`)).status, 404);
  t.is((await call(agent.server, '/api/admin/bots/bot_9_9_nobody/backups', { body: {} })).status, 404);
});

test("a backup in pre mode runs its command in the running bot first and copies what it made, live; a command that fails or hangs makes no backup", async (t) => {
  const id = await madeWithData(t);
  const container = fixture.docker.getContainer(id);
  const startedBefore = (await container.inspect()).State.StartedAt;
  const backups = `/api/admin/bots/${id}/backups`;
  // As `sqlite3 db .backup` makes a consistent copy beside the live file: here, a snapshot of the counter.
  const made = await call(agent.server, backups, { body: { mode: 'pre', pre: ['sh', '-c', 'cp /data/count /data/count.snapshot && echo snapshot made'] } });
  t.is(made.status, 201, made.text);
  const backup = made.body?.backup as BackupAnswer & { pre?: Record<string, unknown> };
  t.like(backup, { mode: 'pre', downtime_ms: null });
  t.deepEqual(backup.pre, { command: ['sh', '-c', 'cp /data/count /data/count.snapshot && echo snapshot made'], exit_code: 0, output: 'snapshot made\n', output_truncated: false });
  t.is((await container.inspect()).State.StartedAt, startedBefore, 'not stopped or restarted');
  const bytes = Buffer.from(await (await fetch(archiveUrl(id, backup.id, '/data'))).arrayBuffer());
  t.is(fileInArchive(bytes, 'data/count.snapshot'), '1\n', "the pre command's snapshot is in the backup");
  t.like((await call(agent.server, `${backups}/${backup.id}`)).body?.backup, { mode: 'pre', pre: { exit_code: 0 } });

  const listed = async () => ((await call(agent.server, backups)).body?.backups as BackupAnswer[]).length;
  const failing = await call(agent.server, backups, { body: { mode: 'pre', pre: ['sh', '-c', 'echo database is locked >&2; exit 5'] } });
  t.is(failing.status, 422, failing.text);
  t.regex(String(failing.body?.msg), /pre command .* exited with code 5; no backup was made: database is locked/);
  const hanging = await call(agent.server, backups, { body: { mode: 'pre', pre: ['sleep', '300'], pre_timeout_s: 1 } });
  t.is(hanging.status, 422, hanging.text);
  t.regex(String(hanging.body?.msg), /did not end within 1 s and was killed; no backup was made/);
  t.is(await listed(), 1, 'neither made a backup');
  t.true((await container.inspect()).State.Running);

  for (const [body, msg] of [
    [{ mode: 'pre' }, /^pre is required in mode pre/],
    [{ mode: 'live', pre: ['true'] }, /^pre and pre_timeout_s are taken only in mode pre$/],
    [{ mode: 'pre', pre: [] }, /^pre must name a program$/],
    [{ mode: 'pre', pre: ['true'], pre_timeout_s: 601 }, /^pre_timeout_s must be a whole number from 1 to 600$/],
  ] as const) {
    const refused = await call(agent.server, backups, { body });
    t.is(refused.status, 400, refused.text);
    t.regex(String(refused.body?.msg), msg);
  }
  await fixture.docker.getContainer(id).stop({ t: 1 });
  const stopped = await call(agent.server, backups, { body: { mode: 'pre', pre: ['true'] } });
  t.is(stopped.status, 422, stopped.text);
  t.regex(String(stopped.body?.msg), /is not running: a backup's pre command runs in the bot/);
});

test('a backup a SIGKILL cut short (its partial folder) is never listed, and is removed when the list is next read', async (t) => {
  const id = await madeWithData(t);
  const partial = join(backupDir, id, '.partial-bak_20261203T120000Z_0123abcd');
  mkdirSync(partial, { recursive: true });
  writeFileSync(join(partial, 'folder-0.tar.gz'), 'half');
  const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live' } });
  t.is(made.status, 201, made.text);
  const listed = await call(agent.server, `/api/admin/bots/${id}/backups`);
  t.deepEqual((listed.body?.backups as BackupAnswer[]).map((kept) => kept.id), [(made.body?.backup as BackupAnswer).id]);
  t.deepEqual(readdirSync(join(backupDir, id)), [(made.body?.backup as BackupAnswer).id]);
});

test("a schedule's backup action makes a backup of the bot, listed with the others, its run naming it", async (t) => {
  const id = await madeWithData(t);
  const wrong = await call(agent.server, `/api/admin/bots/${id}/schedules`, { body: { cron: '@yearly', actions: [{ type: 'backup', mode: 'pre' }] } });
  t.is(wrong.status, 422, wrong.text);
  t.regex(String(wrong.body?.msg), /pre is required in mode pre/);
  const made = await call(agent.server, `/api/admin/bots/${id}/schedules`, { body: { cron: '@yearly', actions: [{ type: 'backup', mode: 'pre', pre: ['sh', '-c', 'date > /data/stamp'], pre_timeout_s: 20 }] } });
  t.is(made.status, 201, made.text);
  const scheduleId = (made.body?.schedule as { id: string }).id;
  const ran = await call(agent.server, `/api/admin/bots/${id}/schedules/${scheduleId}/run`, { method: 'POST' });
  t.is(ran.status, 202, ran.text);
  let run: { state?: string; actions?: { message?: string }[] } | undefined;
  t.true(
    await eventually(async () => {
      run = ((await call(agent.server, `/api/bots/${id}/schedules/${scheduleId}/runs`)).body?.runs as (typeof run)[])[0];
      return run?.state !== undefined && run.state !== 'running';
    }, 30_000, 200),
    'the run never ended',
  );
  t.is(run?.state, 'succeeded', JSON.stringify(run));
  const listed = (await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups as BackupAnswer[];
  t.is(listed.length, 1);
  t.like(listed[0], { mode: 'pre', pre: { command: ['sh', '-c', 'date > /data/stamp'], exit_code: 0 } });
  t.regex(String(run?.actions?.[0]?.message), new RegExp(`^backup ${listed[0]!.id} of bot ${id} made`));
});

test('retention keeps the newest as asked and never a locked backup; a locked backup is not removed by hand until unlocked', async (t) => {
  const id = await madeWithData(t);
  const take = async (body: Record<string, unknown>) => {
    const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live', ...body } });
    t.is(made.status, 201, made.text);
    return made.body as { backup: BackupAnswer & { locked: boolean }; removed: string[] };
  };
  const first = (await take({})).backup;
  const locked = await call(agent.server, `/api/admin/bots/${id}/backups/${first.id}/lock`, { method: 'POST' });
  t.is(locked.status, 200, locked.text);
  t.like(locked.body?.backup, { id: first.id, locked: true });
  const second = (await take({})).backup;
  const third = await take({ keep: { last: 1 } });
  t.deepEqual(third.removed, [second.id], 'the older unlocked one went; the locked one stayed');
  t.deepEqual(
    ((await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups as BackupAnswer[]).map((kept) => kept.id),
    [third.backup.id, first.id],
  );
  const refused = await call(agent.server, `/api/admin/bots/${id}/backups/${first.id}`, { method: 'DELETE' });
  t.is(refused.status, 409, refused.text);
  t.regex(String(refused.body?.msg), /is locked: unlock it first/);
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${first.id}/unlock`, { method: 'POST' })).status, 200);
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${first.id}`, { method: 'DELETE' })).status, 200);
  const badKeep = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { keep: { last: 1, hourly: 2 } } });
  t.is(badKeep.status, 400, badKeep.text);
  t.regex(String(badKeep.body?.msg), /keep takes last, days, weeks and months/);
});
