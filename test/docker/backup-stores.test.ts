import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { BackupStores } from '../../src/backups/backup-stores.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { freePort } from '../helpers/free-port.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { newBucket, S3_KEYS, s3Endpoint } from '../helpers/s3.js';

// Backups copied to S3-compatible stores (docs/api.md §20), against a real one (versitygw on loopback): copied
// whole or never listed, read back and restored from the store; a store that refuses the keys, is not there or
// does not answer fails the backup clearly, the bot running again, the keys never said.
const run = promisify(execFile);
const fixture = new DockerFixture();
const backupDir = mkdtempSync(join(tmpdir(), 'bot-agent-stores-'));
const WRONG_SECRET = 'wrong-secret-never-shown-0123456789';
let agent: ProvisioningAgent;
let bucket: string;
let s3: Awaited<ReturnType<typeof newBucket>>['client'];
const silentSockets = new Set<Socket>();
const silent = createServer((socket) => void silentSockets.add(socket));

/** A second versitygw of its own, serving a disk of 3 MiB (tmpfs, as root in npm test): a store that fills up. */
const fullStore = { dir: mkdtempSync(join(tmpdir(), 'bot-agent-s3-full-')), port: 0, endpoint: '' };
const fullStoreEnv = () => ({ ...process.env, BOT_AGENT_S3_DATA: fullStore.dir, BOT_AGENT_S3_PORT: String(fullStore.port) });

test.before(async () => {
  await fixture.ready();
  ({ bucket, client: s3 } = await newBucket('bot-agent-stores'));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', fullStore.dir]);
  fullStore.port = await freePort();
  fullStore.endpoint = (await run('bash', ['scripts/s3.sh'], { env: fullStoreEnv() })).stdout.trim().split('\n').at(-1) ?? '';
  await new S3Client({ endpoint: fullStore.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: S3_KEYS }).send(new CreateBucketCommand({ Bucket: bucket }));
  const base = { endpoint: s3Endpoint(), bucket, access_key_id: S3_KEYS.accessKeyId };
  const stores = [
    { name: 'offsite', ...base, prefix: 'agent-1/', secret_access_key: S3_KEYS.secretAccessKey },
    { name: 'badkeys', ...base, prefix: 'agent-1/', secret_access_key: WRONG_SECRET },
    { name: 'gone', ...base, endpoint: 'http://127.0.0.1:1', secret_access_key: S3_KEYS.secretAccessKey },
    { name: 'silent', ...base, endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, secret_access_key: S3_KEYS.secretAccessKey, timeout_s: 2 },
    { name: 'full', ...base, endpoint: fullStore.endpoint, secret_access_key: S3_KEYS.secretAccessKey },
  ];
  const file = join(backupDir, 'stores.json');
  writeFileSync(file, JSON.stringify({ stores }), { mode: 0o600 });
  agent = await provisioningAgent(fixture, 'address', { config: { backupDir: join(backupDir, 'folder'), backupStoresFile: file } });
});

test.after.always(async () => {
  await agent?.close();
  await run('bash', ['scripts/s3.sh', '--stop'], { env: fullStoreEnv() }).catch(() => undefined);
  await run('umount', [fullStore.dir]).catch(() => undefined);
  rmSync(fullStore.dir, { recursive: true, force: true });
  for (const socket of silentSockets) socket.destroy();
  silent.close();
  await fixture.cleanup();
  rmSync(backupDir, { recursive: true, force: true });
});

const COUNTER = `n=$(cat /data/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/count; ${IDLE_BOT}`;

interface BackupAnswer {
  id: string;
  copies: { store: string; ok: boolean; message?: string }[];
  verification: { ok: boolean } | null;
}

async function madeWithData(t: ExecutionContext): Promise<string> {
  const id = fixture.newBotId();
  t.teardown(async () => {
    await fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined);
    const listed = await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } });
    for (const volume of listed.Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
  });
  const made = await call(agent.server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', COUNTER], data: [{ path: '/data' }] } });
  t.is(made.status, 201, made.text);
  t.true(await eventually(async () => (await sh(id, 'cat /data/count 2>/dev/null').catch(() => '')) === '1', 30_000, 200));
  return id;
}

async function sh(botId: string, script: string): Promise<string> {
  return (await fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, script)).trim();
}

test("a backup copied to a store is listed there whole, read back and restored from it though the agent's folder lost it", async (t) => {
  const id = await madeWithData(t);
  await sh(id, 'echo precious > /data/users.db');
  const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'stop', stores: ['offsite'] } });
  t.is(made.status, 201, made.text);
  const backup = made.body?.backup as BackupAnswer;
  t.like(backup.copies, [{ store: 'offsite', ok: true }]);
  const objects = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `agent-1/${id}/${backup.id}/` }));
  t.deepEqual((objects.Contents ?? []).map((object) => object.Key).sort(), [`agent-1/${id}/${backup.id}/backup.json`, `agent-1/${id}/${backup.id}/folder-0.tar.gz`]);
  const listed = await call(agent.server, `/api/admin/bots/${id}/backups?store=offsite`);
  t.is(listed.status, 200, listed.text);
  t.deepEqual((listed.body?.backups as BackupAnswer[]).map((kept) => kept.id), [backup.id]);

  // The agent's folder loses it: the store's copy is what is restored.
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}`, { method: 'DELETE' })).status, 200);
  await sh(id, 'echo overwritten > /data/users.db');
  const verified = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/verify?store=offsite`, { method: 'POST' });
  t.is(verified.status, 200, verified.text);
  t.like((verified.body?.backup as BackupAnswer).verification, { ok: true });
  const restored = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/restore?store=offsite`, { method: 'POST' });
  t.is(restored.status, 200, restored.text);
  t.is(await sh(id, 'cat /data/users.db'), 'precious');
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/bak_20260101T000000Z_00000000?store=offsite`)).status, 404);
});

test("archives a copy or a removal cut short left in a store (no manifest) are removed by a listing once none has been written for a while; a whole backup stays", async (t) => {
  const id = await madeWithData(t);
  const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live', stores: ['offsite'] } });
  t.is(made.status, 201, made.text);
  const whole = (made.body?.backup as BackupAnswer).id;
  // What an agent killed mid-copy (or mid-removal, after the manifest went) leaves: an archive and no manifest.
  const orphan = 'bak_20260101T000000Z_0badf00d';
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `agent-1/${id}/${orphan}/folder-0.tar.gz`, Body: 'half an archive' }));
  const keys = async () => ((await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `agent-1/${id}/` }))).Contents ?? []).map((object) => object.Key).sort();
  const config = { name: 'offsite', endpoint: s3Endpoint(), bucket, prefix: 'agent-1/', region: 'us-east-1', force_path_style: true, timeout_s: 30, access_key_id: S3_KEYS.accessKeyId, secret_access_key: S3_KEYS.secretAccessKey };
  // Written just now: it may be a copy under way, so it stays.
  const patient = new BackupStores([config]);
  t.teardown(() => patient.close());
  t.deepEqual((await patient.list('offsite', id)).map((backup) => backup.id), [whole]);
  t.true((await keys()).includes(`agent-1/${id}/${orphan}/folder-0.tar.gz`));
  // Past the grace: gone, the whole backup untouched.
  const swept = new BackupStores([config], 0);
  t.teardown(() => swept.close());
  t.deepEqual((await swept.list('offsite', id)).map((backup) => backup.id), [whole]);
  t.deepEqual(await keys(), [`agent-1/${id}/${whole}/backup.json`, `agent-1/${id}/${whole}/folder-0.tar.gz`]);
});

test('a store that refuses the keys, is not there or does not answer fails the backup clearly; the bot runs again, the keys are never said, nothing half-copied is listed', async (t) => {
  const id = await madeWithData(t);
  for (const [store, message] of [
    ['badkeys', /copy to store badkeys failed: .*(SignatureDoesNotMatch|AccessDenied|InvalidAccessKeyId|HTTP 403)/],
    ['gone', /copy to store gone failed: .*(ECONNREFUSED|connect)/i],
    ['silent', /copy to store silent failed: .*(timeout|Timeout|socket hang up|ECONNRESET)/],
  ] as const) {
    const started = Date.now();
    const failed = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'stop', stores: [store] } });
    t.is(failed.status, 502, `${store}: ${failed.text}`);
    t.regex(String(failed.body?.msg), message, store);
    t.regex(String(failed.body?.msg), /was kept in the agent's folder/);
    t.false(failed.text.includes(WRONG_SECRET) || failed.text.includes(S3_KEYS.secretAccessKey), `${store}: a key was said`);
    t.true(Date.now() - started < 60_000, `${store}: took ${Date.now() - started} ms`);
    t.true((await fixture.docker.getContainer(id).inspect()).State.Running, `${store}: the bot stopped for it runs again`);
  }
  const local = (await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups as BackupAnswer[];
  t.is(local.length, 3);
  t.true(local.every((kept) => kept.copies.length === 1 && !kept.copies[0]!.ok));
  t.deepEqual((await call(agent.server, `/api/admin/bots/${id}/backups?store=offsite`)).body?.backups, [], 'the store lists none of them');
  const listedFailing = await call(agent.server, `/api/admin/bots/${id}/backups?store=gone`);
  t.is(listedFailing.status, 502, listedFailing.text);
  const unknown = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { stores: ['nowhere'] } });
  t.is(unknown.status, 422, unknown.text);
  t.regex(String(unknown.body?.msg), /no backup store "nowhere": the stores are offsite, badkeys, gone, silent, full/);
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { stores: 'offsite' } })).status, 400);
});

test('a store whose disk is full fails the backup clearly; the bot runs again, and the store lists nothing of it', async (t) => {
  const id = await madeWithData(t);
  // Random bytes: gzip cannot shrink them under the store's 3 MiB.
  await sh(id, 'head -c 4194304 /dev/urandom > /data/blob');
  const failed = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'stop', stores: ['full'] } });
  t.is(failed.status, 502, failed.text);
  t.regex(String(failed.body?.msg), /was kept in the agent's folder, but its copy to store full failed: /);
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running, 'the bot stopped for it runs again');
  t.deepEqual((await call(agent.server, `/api/admin/bots/${id}/backups?store=full`)).body?.backups, [], 'nothing half-copied is listed');
});

test("a schedule backs up to a store and then verifies the store's newest backup; its runs say so", async (t) => {
  const id = await madeWithData(t);
  const made = await call(agent.server, `/api/admin/bots/${id}/schedules`, {
    body: { cron: '@yearly', actions: [{ type: 'backup', mode: 'live', stores: ['offsite'] }, { type: 'verify', store: 'offsite' }] },
  });
  t.is(made.status, 201, made.text);
  const schedule = made.body?.schedule as { id: string; actions: Record<string, unknown>[] };
  t.like(schedule.actions, [{ type: 'backup', stores: ['offsite'] }, { type: 'verify', store: 'offsite' }]);
  t.is((await call(agent.server, `/api/admin/bots/${id}/schedules/${schedule.id}/run`, { method: 'POST' })).status, 202);
  let run: { state?: string; actions?: { outcome?: string; message?: string }[] } | undefined;
  t.true(
    await eventually(async () => {
      run = ((await call(agent.server, `/api/bots/${id}/schedules/${schedule.id}/runs`)).body?.runs as (typeof run)[])[0];
      return run?.state !== undefined && run.state !== 'running';
    }, 60_000, 200),
    'the run never ended',
  );
  t.is(run?.state, 'succeeded', JSON.stringify(run));
  const [inStore] = (await call(agent.server, `/api/admin/bots/${id}/backups?store=offsite`)).body?.backups as BackupAnswer[];
  t.truthy(inStore);
  t.regex(String(run?.actions?.[1]?.message), new RegExp(`^backup ${inStore!.id} of bot ${id} verified`));
  const kept = (await call(agent.server, `/api/admin/bots/${id}/backups/${inStore!.id}`)).body?.backup as BackupAnswer;
  t.like(kept.verification, { ok: true });
  const bad = await call(agent.server, `/api/admin/bots/${id}/schedules`, { body: { cron: '@yearly', actions: [{ type: 'verify', store: 'Not A Store' }] } });
  t.is(bad.status, 422, bad.text);
  t.regex(String(bad.body?.msg), /actions\[0\].store must be a store name/);
});

test("a backup's keep prunes each store it reached as the agent's folder, never a locked one; a store's copy is removed on its own, the folder's kept", async (t) => {
  const id = await madeWithData(t);
  const take = async (body: Record<string, unknown>) => {
    const made = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live', stores: ['offsite'], ...body } });
    t.is(made.status, 201, made.text);
    return made.body as { backup: BackupAnswer; removed: string[] };
  };
  const ids = async (store?: string) => ((await call(agent.server, `/api/admin/bots/${id}/backups${store ? `?store=${store}` : ''}`)).body?.backups as BackupAnswer[]).map((kept) => kept.id);
  const keys = async (backupId: string) => ((await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `agent-1/${id}/${backupId}/` }))).Contents ?? []).map((object) => object.Key);
  const first = (await take({})).backup.id;
  const second = (await take({})).backup.id;
  const third = (await take({})).backup.id;
  // Locked in the agent's folder after its copy was made: the store's copy is kept for it too.
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${first}/lock`, { method: 'POST' })).status, 200);
  const newest = await take({ keep: { last: 1 } });
  t.deepEqual([...newest.removed].sort(), [second, third].sort());
  t.deepEqual(await ids('offsite'), [newest.backup.id, first]);
  t.deepEqual(await ids(), [newest.backup.id, first]);
  t.deepEqual(await keys(second), [], "a pruned backup's archives left the store too");

  const locked = await call(agent.server, `/api/admin/bots/${id}/backups/${first}?store=offsite`, { method: 'DELETE' });
  t.is(locked.status, 409, locked.text);
  t.regex(String(locked.body?.msg), /is locked: unlock it first/);
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${first}/unlock`, { method: 'POST' })).status, 200);
  const removed = await call(agent.server, `/api/admin/bots/${id}/backups/${first}?store=offsite`, { method: 'DELETE' });
  t.is(removed.status, 200, removed.text);
  t.regex(String(removed.body?.msg ?? removed.body?.message), new RegExp(`${first} of bot ${id} removed from store offsite`));
  t.deepEqual(await ids('offsite'), [newest.backup.id]);
  t.deepEqual(await keys(first), []);
  t.deepEqual(await ids(), [newest.backup.id, first], "the agent's folder keeps its own");
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${first}?store=offsite`, { method: 'DELETE' })).status, 404);
  t.is((await call(agent.server, `/api/admin/bots/${id}/backups/${first}?store=nowhere`, { method: 'DELETE' })).status, 422);
});
