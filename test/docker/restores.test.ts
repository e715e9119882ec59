import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { gzipSync } from 'node:zlib';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { pack } from 'tar-stream';
import type { Header } from 'tar-stream';
import { BackupFolder } from '../../src/backups/backup-folder.js';
import { Backups } from '../../src/backups/backups.js';
import { DockerDataArchives } from '../../src/runtime/docker/docker-archives.js';
import { DockerDataRestores } from '../../src/runtime/docker/docker-restores.js';
import { BOT_LABEL, RESTORE_OF_LABEL, RESTORE_STEP_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { openStream } from '../helpers/sse-client.js';

// Restores and verifications of backups (docs/api.md §20) on the real engine: checked, unpacked beside the bot
// and read back, swapped in by one helper the engine runs to its end; a restore an agent left, settled by the next.
const fixture = new DockerFixture();
const backupDir = mkdtempSync(join(tmpdir(), 'bot-agent-restores-'));
const mine = new Set<string>();
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address', { config: { backupDir }, restoresInCare: (botId) => mine.has(botId) });
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
  rmSync(backupDir, { recursive: true, force: true });
});

/** Each start of the bot adds one to the count in its data folder, then it idles. */
const COUNTER = `n=$(cat /data/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/count; ${IDLE_BOT}`;

interface BackupAnswer {
  id: string;
  verification: { at: string; ok: boolean; message?: string } | null;
  folders: { path: string; file: string; size_bytes: number; sha256: string }[];
}

async function madeWithData(t: ExecutionContext, sizeMb?: number, script = COUNTER): Promise<string> {
  const id = fixture.newBotId();
  mine.add(id);
  t.teardown(async () => {
    await fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined);
    const listed = await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } });
    for (const volume of listed.Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
  });
  const data = [{ path: '/data', ...(sizeMb === undefined ? {} : { size_mb: sizeMb }) }];
  const made = await call(agent.server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', script], data } });
  t.is(made.status, 201, made.text);
  t.true(await eventually(async () => (await sh(id, 'cat /data/count 2>/dev/null').catch(() => '')) === '1', 30_000, 200), 'the bot counted its first start');
  return id;
}

async function sh(botId: string, script: string): Promise<string> {
  return (await fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, script)).trim();
}

async function backUp(t: ExecutionContext, botId: string, mode: 'stop' | 'live' = 'live'): Promise<BackupAnswer> {
  const made = await call(agent.server, `/api/admin/bots/${botId}/backups`, { body: { mode } });
  t.is(made.status, 201, made.text);
  return made.body?.backup as BackupAnswer;
}

/** Starts and stops the bot on the engine itself, as an agent's lifecycle would. */
function powerOf(id: string) {
  const container = fixture.docker.getContainer(id);
  return { running: async () => (await container.inspect()).State.Running, stop: () => container.stop({ t: 1 }), start: () => container.start() };
}

/** What the engine holds of the bot's restores: helpers and scratch volumes. */
async function restoreLeftovers(botId: string): Promise<number> {
  const filters = { label: [`${RESTORE_OF_LABEL}=${botId}`] };
  return (await fixture.docker.listContainers({ all: true, filters })).length + ((await fixture.docker.listVolumes({ filters })).Volumes ?? []).length;
}

/** The backup's archive of /data replaced by `entries` (gzip-compressed), its manifest's checksum and size made to match. */
async function replaceArchive(botId: string, backup: BackupAnswer, entries: Array<Partial<Header> & { name: string; body?: string | Buffer }>): Promise<void> {
  const packed = pack();
  for (const { body, ...header } of entries) packed.entry(header, body ?? '');
  packed.finalize();
  const bytes = gzipSync(await buffer(packed as unknown as Readable));
  const dir = join(backupDir, botId, backup.id);
  writeFileSync(join(dir, backup.folders[0]!.file), bytes);
  const manifest = JSON.parse(readFileSync(join(dir, 'backup.json'), 'utf8')) as BackupAnswer & { size_bytes: number };
  manifest.folders[0] = { ...manifest.folders[0]!, size_bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
  writeFileSync(join(dir, 'backup.json'), JSON.stringify({ ...manifest, size_bytes: bytes.length }));
}

test('a restore puts the backup back: files gone since are gone, owners, modes and links kept; the data as it was is kept as a backup; the bot runs again', async (t) => {
  const id = await madeWithData(t);
  await sh(id, 'mkdir -p /data/sub && echo kept > /data/sub/users.db && chown 1000:1000 /data/sub/users.db && chmod 600 /data/sub/users.db && ln -s sub/users.db /data/latest');
  const backup = await backUp(t, id);
  await sh(id, 'echo 40 > /data/count && echo later > /data/extra && rm /data/sub/users.db');
  const events = await openStream(agent.server, `/api/bots/${id}/events`);
  t.teardown(() => events.close());
  const startedBefore = (await fixture.docker.getContainer(id).inspect()).State.StartedAt;

  const restored = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/restore`, { method: 'POST' });
  t.is(restored.status, 200, restored.text);
  t.regex(String(restored.body?.message), new RegExp(`backup ${backup.id} of bot ${id} restored into bot ${id}`));
  const state = (await fixture.docker.getContainer(id).inspect()).State;
  t.true(state.Running, 'the bot runs again');
  t.not(state.StartedAt, startedBefore, 'it was stopped for the swap');
  // The restored count was 1; the new run counted its start over it.
  t.true(
    await eventually(async () => (await sh(id, 'cat /data/count')) === '2', 30_000, 200),
    `count ${await sh(id, 'cat /data/count')}; the bot's events: ${events.events.map((event) => `${event.event} ${JSON.stringify(event.data)}`).join('\n')}`,
  );
  t.is(await sh(id, 'test -e /data/extra && echo there || echo gone'), 'gone');
  t.is(await sh(id, 'cat /data/latest'), 'kept');
  t.is(await sh(id, 'stat -c "%u:%g %a" /data/sub/users.db'), '1000:1000 600');
  t.is(await sh(id, 'test -L /data/latest && echo link'), 'link');

  // The data as it was just before: a backup of its own, listed, holding what the restore replaced.
  const before = restored.body?.before as BackupAnswer;
  const listed = ((await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups as BackupAnswer[]).map((kept) => kept.id);
  t.deepEqual(listed.sort(), [backup.id, before.id].sort());
  const event = await events.next((received) => received.event === 'restored', 10_000);
  t.like(event.data, { backup_id: backup.id, before_backup_id: before.id });
  const undo = await call(agent.server, `/api/admin/bots/${id}/backups/${before.id}/restore`, { method: 'POST' });
  t.is(undo.status, 200, undo.text);
  t.is(await sh(id, 'cat /data/extra'), 'later', 'the backup made before the restore restores what it replaced');
  t.is(await restoreLeftovers(id), 0, 'no helper or scratch volume is left');
});

// A restore is judged as a deploy is (docs/api.md §20): a bot that will not run on the restored data has it undone.
test('a restored bot that does not stay up has the restore undone: its data as it was back, the bot running, told as restore-failed, 422', async (t) => {
  const id = await madeWithData(t, undefined, `test -e /data/poison && { echo poisoned; exit 3; }; ${COUNTER}`);
  await sh(id, 'echo 1 > /data/poison');
  const poisoned = await backUp(t, id);
  await sh(id, 'rm /data/poison && echo now > /data/note');
  const events = await openStream(agent.server, `/api/bots/${id}/events`);
  t.teardown(() => events.close());

  const restored = await call(agent.server, `/api/admin/bots/${id}/backups/${poisoned.id}/restore`, { body: { min_ready_s: 3, deadline_s: 30 } });
  t.is(restored.status, 422, restored.text);
  t.regex(String(restored.body?.msg), new RegExp(`^the restore of backup ${poisoned.id} into bot ${id} was undone: its run exited with code 3; its data as it was \\(backup bak_\\w+\\) is back$`));
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running, 'the bot runs again on its data as it was');
  t.is(await sh(id, 'cat /data/note; test -e /data/poison && echo poisoned || echo clean'), 'now\nclean');
  const event = await events.next((received) => received.event === 'restore-failed', 10_000);
  t.like(event.data, { backup_id: poisoned.id, reason: 'its run exited with code 3' });
  t.false(events.events.some((received) => received.event === 'restored'), 'an undone restore is no restore');
  t.is(await restoreLeftovers(id), 0, 'no helper or scratch volume is left');
  for (const body of [{ min_ready_s: -1 }, { deadline_s: 4 }, { min_ready_s: 'soon' }]) {
    const refused = await call(agent.server, `/api/admin/bots/${id}/backups/${poisoned.id}/restore`, { body });
    t.true(refused.status === 400 || refused.status === 422, refused.text);
    t.regex(String(refused.body?.msg), /min_ready_s|deadline_s/);
  }
});

test('a verification reads the backup back whole and keeps the outcome; a changed archive fails it, is told, and is never restored', async (t) => {
  const id = await madeWithData(t);
  const backup = await backUp(t, id);
  t.is(backup.verification, null);
  const verified = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/verify`, { method: 'POST' });
  t.is(verified.status, 200, verified.text);
  t.like((verified.body?.backup as BackupAnswer).verification, { ok: true });
  t.like(((await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}`)).body?.backup as BackupAnswer).verification, { ok: true });

  const events = await openStream(agent.server, `/api/bots/${id}/events`);
  t.teardown(() => events.close());
  // One byte of the archive changed on disk.
  const file = join(backupDir, id, backup.id, backup.folders[0]!.file);
  const bytes = readFileSync(file);
  bytes[bytes.length - 12] = (bytes[bytes.length - 12]! + 1) % 256;
  writeFileSync(file, bytes);
  const failed = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/verify`, { method: 'POST' });
  t.is(failed.status, 422, failed.text);
  t.regex(String(failed.body?.msg), /failed its verification: .*(SHA-256|cannot be read)/);
  const kept = ((await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}`)).body?.backup as BackupAnswer).verification;
  t.is(kept?.ok, false);
  t.like((await events.next((received) => received.event === 'backup-verify-failed', 10_000)).data, { backup_id: backup.id });

  await sh(id, 'echo 7 > /data/count');
  const startedBefore = (await fixture.docker.getContainer(id).inspect()).State.StartedAt;
  const refused = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/restore`, { method: 'POST' });
  t.is(refused.status, 422, refused.text);
  t.regex(String(refused.body?.msg), /is refused: .*nothing was written/);
  t.is(await sh(id, 'cat /data/count'), '7', 'the data as it was');
  t.is((await fixture.docker.getContainer(id).inspect()).State.StartedAt, startedBefore, 'the bot was not stopped');
  t.is(await restoreLeftovers(id), 0);
});

test('an archive that climbs out, links out, holds a device or unpacks past the folder\'s size is refused, nothing written anywhere, though its checksum matches', async (t) => {
  const id = await madeWithData(t, 1);
  const backup = await backUp(t, id);
  const hostile: Array<[string, Array<Partial<Header> & { name: string; body?: string | Buffer }>, RegExp]> = [
    ['climbs', [{ name: 'data/../escaped', body: 'out' }], /not inside the folder/],
    ['absolute', [{ name: '/escaped', body: 'out' }], /not inside the folder/],
    ['links out', [{ name: 'data/passwd', type: 'symlink', linkname: '/etc/passwd' }], /links to .*outside the folder/],
    ['a device', [{ name: 'data/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 }], /character-device/],
    ['a tar bomb', [{ name: 'data/zeros', body: Buffer.alloc(2 * 1024 * 1024) }], /more than 1048576 bytes/],
  ];
  for (const [what, entries, message] of hostile) {
    await replaceArchive(id, backup, [{ name: 'data', type: 'directory', mode: 0o755 }, { name: 'data/count', body: '99\n' }, ...entries]);
    const refused = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/restore`, { method: 'POST' });
    t.is(refused.status, 422, `${what}: ${refused.text}`);
    t.regex(String(refused.body?.msg), message, what);
    t.is(await sh(id, 'cat /data/count'), '1', `${what}: the data as it was`);
    t.is(await sh(id, 'ls /escaped /data/escaped /data/passwd /data/null 2>/dev/null | wc -l'), '0', `${what}: nothing written`);
  }
  t.is(await restoreLeftovers(id), 0);
});

test('a restore an agent left is settled by the next: undone before its swap began, carried to its end after; the bot runs again', async (t) => {
  const id = await madeWithData(t);
  await sh(id, 'echo old > /data/which');
  const backup = await backUp(t, id);
  const restores = new DockerDataRestores(fixture.docker);
  const folder = new BackupFolder(backupDir);
  const archive = (path: string) => ({ path, open: () => Readable.from(readFileSync(join(backupDir, id, backup.id, backup.folders[0]!.file))) });

  // Killed after its scratch copy was made and the bot stopped, before the swap: the next agent of its folder undoes it.
  await sh(id, 'echo current > /data/which');
  await folder.markRestore('0000aaaa', id);
  await restores.scratch(id, [archive('/data')], { tag: '0000aaaa', startAfter: true, signal: AbortSignal.timeout(60_000) });
  await fixture.docker.getContainer(id).stop({ t: 1 });
  const next = await provisioningAgent(fixture, 'address', { config: { backupDir }, restoresInCare: (botId) => botId === id });
  t.teardown(() => next.close());
  t.true(await eventually(async () => (await fixture.docker.getContainer(id).inspect()).State.Running, 30_000, 200), 'started again, as it ran before');
  t.true(await eventually(async () => (await restoreLeftovers(id)) === 0, 30_000, 200), 'its helper and scratch volume removed');
  t.is(await sh(id, 'cat /data/which'), 'current', 'the data as it was: the swap never began');
  t.false((await folder.restoresMarked()).has('0000aaaa'), 'its mark removed');

  // Killed once the engine runs its swap: the next agent waits for the swap's end, and the data is the backup's.
  await folder.markRestore('0000bbbb', id);
  const scratch = await restores.scratch(id, [archive('/data')], { tag: '0000bbbb', startAfter: true, signal: AbortSignal.timeout(60_000) });
  await fixture.docker.getContainer(id).stop({ t: 1 });
  const swapping = scratch.swap(AbortSignal.timeout(60_000)).catch(() => undefined);
  // Once the engine has begun it (an agent killed after its start): one killed between the swap's create and its start leaves a swap the next agent begins itself.
  const begun = async () => (await fixture.docker.listContainers({ all: true, filters: { label: [`${RESTORE_OF_LABEL}=${id}`, `${RESTORE_STEP_LABEL}=swap`] } })).filter((container) => container.State === 'running' || container.State === 'exited').length === 1;
  t.true(await eventually(begun, 30_000, 50));
  const settled = await new Backups(new DockerDataArchives(fixture.docker), folder, powerOf(id), restores).settleRestores((botId) => botId === id);
  await swapping;
  t.deepEqual(settled, { started: [id], failures: [] });
  t.is(await restoreLeftovers(id), 0);
  t.false((await folder.restoresMarked()).has('0000bbbb'));
  t.is(await sh(id, 'cat /data/which'), 'old', 'the backup swapped in whole');
});

test("a restore no mark of the agent's folder names is another agent's, under way: left alone", async (t) => {
  const id = await madeWithData(t);
  const backup = await backUp(t, id);
  const restores = new DockerDataRestores(fixture.docker);
  const archive = { path: '/data', open: () => Readable.from(readFileSync(join(backupDir, id, backup.id, backup.folders[0]!.file))) };
  await restores.scratch(id, [archive], { tag: '0000cccc', startAfter: false, signal: AbortSignal.timeout(60_000) });
  const held = await restoreLeftovers(id);
  t.true(held > 0);
  const backups = new Backups(new DockerDataArchives(fixture.docker), new BackupFolder(backupDir), powerOf(id), restores);
  t.deepEqual(await backups.settleRestores((botId) => botId === id), { started: [], failures: [] });
  t.is(await restoreLeftovers(id), held, 'nothing of it removed');

  const [left] = (await restores.leftovers()).filter((restore) => restore.tag === '0000cccc');
  t.like(left, { botId: id, startAfter: false });
  t.true(Math.abs(left!.begunAt!.getTime() - Date.now()) < 60_000, 'it says when it began');
  await restores.settle(left!);
  t.is(await restoreLeftovers(id), 0);
});

test("a new bot is made from another's backup: restored into it, the other untouched; a bot without the backup's folders is refused", async (t) => {
  const from = await madeWithData(t);
  await sh(from, 'echo workflows > /data/n8n.sqlite');
  const backup = await backUp(t, from);
  const into = await madeWithData(t);
  const restored = await call(agent.server, `/api/admin/bots/${from}/backups/${backup.id}/restore`, { body: { into } });
  t.is(restored.status, 200, restored.text);
  t.regex(String(restored.body?.message), new RegExp(`of bot ${from} restored into bot ${into}`));
  t.is(await sh(into, 'cat /data/n8n.sqlite'), 'workflows', `the new bot's /data: ${await sh(into, 'ls -la /data')}; the backup: ${JSON.stringify(backup)}`);
  t.true((await fixture.docker.getContainer(into).inspect()).State.Running);
  const before = restored.body?.before as BackupAnswer & { bot_id: string };
  t.is(before.bot_id, into, "the data the new bot had is kept as the new bot's backup");
  t.is(await sh(from, 'cat /data/n8n.sqlite'), 'workflows');
  t.is(((await call(agent.server, `/api/admin/bots/${from}/backups`)).body?.backups as unknown[]).length, 1, 'the backed-up bot gained no backup');

  const elsewhere = fixture.newBotId();
  mine.add(elsewhere);
  t.teardown(() => fixture.docker.getContainer(elsewhere).remove({ force: true, v: true }).catch(() => undefined));
  const other = await call(agent.server, '/api/admin/bots', { body: { bot_id: elsewhere, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/srv' }] } });
  t.is(other.status, 201, other.text);
  const refused = await call(agent.server, `/api/admin/bots/${from}/backups/${backup.id}/restore`, { body: { into: elsewhere } });
  t.is(refused.status, 422, refused.text);
  t.regex(String(refused.body?.msg), new RegExp(`bot ${elsewhere} has no data folder /data now`));
  t.is((await call(agent.server, `/api/admin/bots/${from}/backups/${backup.id}/restore`, { body: { into: '../x' } })).status, 400);
});

test("a swap whose scratch volume is gone is refused before it is made: the bot's data untouched, not emptied", async (t) => {
  const id = await madeWithData(t);
  const backup = await backUp(t, id);
  const restores = new DockerDataRestores(fixture.docker);
  const archive = { path: '/data', open: () => Readable.from(readFileSync(join(backupDir, id, backup.id, backup.folders[0]!.file))) };
  const scratch = await restores.scratch(id, [archive], { tag: '0000dddd', startAfter: false, signal: AbortSignal.timeout(60_000) });
  const filters = { label: [`${RESTORE_OF_LABEL}=${id}`] };
  for (const container of await fixture.docker.listContainers({ all: true, filters })) await fixture.docker.getContainer(container.Id).remove({ force: true });
  for (const volume of (await fixture.docker.listVolumes({ filters })).Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove();
  await sh(id, 'echo kept > /data/which');
  await t.throwsAsync(scratch.swap(AbortSignal.timeout(60_000)), { message: /scratch volume .* is gone/ });
  t.is(await restoreLeftovers(id), 0, 'no swap made, no empty volume made for it');
  t.is(await sh(id, 'cat /data/which'), 'kept');
});
