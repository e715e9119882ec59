import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { buffer } from 'node:stream/consumers';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import test from 'ava';
import { extract } from 'tar-stream';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { DATA_HELPER_LABEL } from '../../src/runtime/kubernetes/kube-data-pods.js';
import { KubeDataRestores } from '../../src/runtime/kubernetes/kube-restores.js';
import { BOT_LABEL, RESTORE_STEP_LABEL, RESTORE_TAG_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { newBucket, S3_KEYS, s3Endpoint } from '../helpers/s3.js';
import { adminKubeConfig, clusterHarness } from './cluster-harness.js';
import { execInPod } from './pod-exec.js';

// Backups and restores of a bot's data on the real cluster (docs/api.md §20): its claim read and written by tar in
// helper pods of its image over the API server, as the chart's ServiceAccount; copied to a real S3 store (versitygw).
const run = promisify(execFile);
const IMAGE = 'bot-agent-testbot:backups';
const COUNTING = ['sh', '-c', 'n=$(cat /data/count 2>/dev/null || echo 0); echo $((n + 1)) > /data/count; trap "exit 0" TERM; while :; do sleep 1; done'];

interface BackupAnswer {
  id: string;
  mode: string;
  downtime_ms: number | null;
  folders: { path: string; sha256: string; size_bytes: number }[];
  copies?: { store: string; ok: boolean }[];
  verification: { ok: boolean; message?: string } | null;
}

async function entriesOf(gzipped: Buffer): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const entries = extract();
  Readable.from(gunzipSync(gzipped)).pipe(entries);
  for await (const entry of entries) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry as AsyncIterable<Buffer>) chunks.push(chunk);
    found.set(entry.header.name.replace(/\/$/, ''), entry.header.type === 'symlink' ? `-> ${entry.header.linkname}` : Buffer.concat(chunks).toString());
  }
  return found;
}

/** What a test agent on the cluster needs for a bot with data: its namespace, its credentials, a way into the bot's pod. */
async function dataAgent(t: { teardown(fn: () => Promise<void>): void }, folder: string, extra: { backupStoresFile?: string; backupDir?: string } = {}) {
  const { harness, namespace, agentConfig } = await clusterHarness({}, 'off');
  const provisioner = createKubernetesProvisioner({ kubeConfig: agentConfig, namespace, agentUrl: 'http://agent:8000' });
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: agentConfig, namespace }), { backupDir: join(folder, 'backups'), dataUsage: { firstMs: 200, everyMs: 1_000 }, ...extra }, '127.0.0.1', provisioner);
  t.teardown(async () => {
    await agent.close();
    await harness.close();
    rmSync(folder, { recursive: true, force: true });
  });
  await run('/usr/bin/docker', ['tag', TEST_IMAGE, IMAGE]);
  await run('bash', ['scripts/kube/images.sh', IMAGE]);
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const runningPod = async (botId: string) =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${botId}` })).items.find((p) => p.status?.containerStatuses?.[0]?.state?.running && !p.metadata?.deletionTimestamp)?.metadata?.name;
  const inBot = async (botId: string, script: string): Promise<string> => {
    let answer = 'no running pod';
    await eventually(async () => {
      const pod = await runningPod(botId);
      if (!pod) return false;
      answer = (await execInPod(adminKubeConfig(), namespace, pod, ['sh', '-c', script]).catch((err: Error) => `failed: ${err.message}`)).trim();
      return !answer.startsWith('failed');
    }, 120_000, 500);
    return answer;
  };
  const counter = async (botId: string, count: number): Promise<string> => {
    let seen = '';
    await eventually(async () => (seen = await inBot(botId, 'cat /data/count')) === String(count), 120_000, 500);
    return seen;
  };
  const create = (botId: string, data: Record<string, unknown>[]) =>
    call(agent.server, '/api/admin/bots', { body: { bot_id: botId, user_id: 'user_9', image: IMAGE, template: 'n8n', token: `secret-${botId}`, command: COUNTING, data } });
  return { harness, namespace, agentConfig, agent, core, inBot, counter, create };
}

test("a bot's claim is backed up, to the folder and to S3, verified and restored on the cluster, into the bot and into a new one; helpers leave nothing", async (t) => {
  t.timeout(900_000);
  const folder = mkdtempSync(join(tmpdir(), 'bot-agent-kube-backups-'));
  const { bucket } = await newBucket('bot-agent-kube');
  const storesFile = join(folder, 'stores.json');
  writeFileSync(storesFile, JSON.stringify({ stores: [{ name: 'offsite', endpoint: s3Endpoint(), bucket, access_key_id: S3_KEYS.accessKeyId, secret_access_key: S3_KEYS.secretAccessKey }] }), { mode: 0o600 });
  const { harness, namespace, agent, core, inBot, counter, create } = await dataAgent(t, folder, { backupStoresFile: storesFile });

  const id = harness.newBotId();
  const made = await create(id, [{ path: '/data', size_mb: 64 }]);
  t.is(made.status, 201, made.text);
  t.is(await counter(id, 1), '1');
  await inBot(id, 'mkdir -p /data/users && printf "ada\\n" > /data/users/list && chmod 600 /data/users/list && ln -s users/list /data/latest');
  // Measured by du in the bot's pod (docs/api.md §19): its status says the folder's bytes.
  await inBot(id, 'head -c 307200 /dev/urandom > /data/users/blob');
  let used: unknown;
  t.true(await eventually(async () => Number(used = ((await call(agent.server, `/api/bots/${id}`)).body?.bot as { data?: { used_bytes: number | null }[] })?.data?.[0]?.used_bytes) >= 307_200, 60_000, 500), `used_bytes: ${String(used)}`);

  // Stop mode: the bot stopped, its claim read by a helper, started again (its counter one more), the downtime measured.
  const taken = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'stop', stores: ['offsite'] } });
  t.is(taken.status, 201, taken.text);
  const backup = taken.body?.backup as BackupAnswer;
  t.like(backup, { mode: 'stop', folders: [{ path: '/data' }], copies: [{ store: 'offsite', ok: true }] });
  t.true(typeof backup.downtime_ms === 'number' && backup.downtime_ms > 0);
  t.is(await counter(id, 2), '2', 'started again after the backup');
  const archive = await fetch(`http://127.0.0.1:${(agent.server.address() as AddressInfo).port}/api/admin/bots/${id}/backups/${backup.id}/archive?folder=/data`);
  t.is(archive.status, 200);
  const entries = await entriesOf(Buffer.from(await archive.arrayBuffer()));
  t.is(entries.get('data/count'), '1\n');
  t.is(entries.get('data/users/list'), 'ada\n');
  t.is(entries.get('data/latest'), '-> users/list');
  t.is(archive.headers.get('x-content-sha256'), backup.folders[0]!.sha256);
  const listed = await call(agent.server, `/api/admin/bots/${id}/backups?store=offsite`, { method: 'GET' });
  t.deepEqual((listed.body?.backups as BackupAnswer[]).map((b) => b.id), [backup.id]);

  // Live: copied as it runs; then verified from the store's copy, unpacked beside the bot's data and read back.
  const live = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live' } });
  t.is(live.status, 201, live.text);
  t.like(live.body?.backup, { mode: 'live', downtime_ms: null });
  const verified = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/verify`, { method: 'POST' });
  t.is(verified.status, 200, verified.text);
  t.like(verified.body?.backup, { verification: { ok: true } });

  // A restore: the files made since are gone, the counter back to 1 (and the start after it makes it 2), modes and links kept.
  await inBot(id, 'echo later > /data/later');
  const restored = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/restore`, { body: { min_ready_s: 2, deadline_s: 90 } });
  t.is(restored.status, 200, restored.text);
  t.truthy((restored.body?.before as BackupAnswer | undefined)?.id, 'the data as it was is kept first');
  t.is(await counter(id, 2), '2');
  t.is(await inBot(id, 'ls -a /data | tr "\\n" " "; stat -c %a /data/users/list; readlink /data/latest'), '. .. count latest users 600\nusers/list');

  // Into a new bot with the same folder: its own claim gets the backup; the first bot is untouched.
  const other = harness.newBotId();
  t.is((await create(other, [{ path: '/data' }])).status, 201);
  t.is(await counter(other, 1), '1');
  const into = await call(agent.server, `/api/admin/bots/${id}/backups/${backup.id}/restore`, { body: { into: other, min_ready_s: 2, deadline_s: 90 } });
  t.is(into.status, 200, into.text);
  t.is(await counter(other, 2), '2', "the new bot runs on the backup's counter");
  t.is(await inBot(other, 'cat /data/users/list'), 'ada');
  t.is(await counter(id, 2), '2');

  // Nothing of the helpers is left: their pods gone.
  t.true(await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: DATA_HELPER_LABEL })).items.length === 0, 120_000, 500), 'helper pods left');
  t.is(await inBot(other, 'ls -a /data | tr "\\n" " "'), '. .. count latest users');
});

// An agent killed mid-restore (docs/api.md §20): the next one finds the restore's helper pods by their labels and
// settles it. Before its swap began, the bot's data stays as it was; once the swap pod is made, it is carried to its end.
test('a restore an agent left on the cluster is settled by the next: undone before its swap, carried to its end after', async (t) => {
  t.timeout(600_000);
  const { harness, namespace, agentConfig, agent, core, inBot, counter, create } = await dataAgent(t, mkdtempSync(join(tmpdir(), 'bot-agent-kube-settle-')));
  const id = harness.newBotId();
  t.is((await create(id, [{ path: '/data' }])).status, 201);
  t.is(await counter(id, 1), '1');
  const packed = pack();
  packed.entry({ name: 'data', type: 'directory', mode: 0o755 });
  packed.entry({ name: 'data/count', mode: 0o644 }, '41\n');
  packed.finalize();
  const archive = gzipSync(await buffer(packed as unknown as Readable));
  const archives = [{ path: '/data', open: () => Readable.from(archive) }];
  const api = { core: agentConfig.makeApiClient(CoreV1Api), apps: agentConfig.makeApiClient(AppsV1Api), namespace };
  const stop = () => call(agent.server, '/api/bots/stop', { body: { bot_id: id, user_id: 'user_9' } });
  const start = () => call(agent.server, '/api/bots/start', { body: { bot_id: id, user_id: 'user_9' } });
  const podsOf = (selector: string) => core.listNamespacedPod({ namespace, labelSelector: selector }).then((pods) => pods.items);

  // Killed with its scratch copy made: settled as not begun, the data as it was.
  t.is((await stop()).status, 200);
  await new KubeDataRestores(agentConfig, api).scratch(id, archives, { tag: 'cafe0001', startAfter: true, signal: AbortSignal.timeout(120_000) });
  const next = new KubeDataRestores(agentConfig, api);
  const [left] = (await next.leftovers()).filter((restore) => restore.tag === 'cafe0001');
  t.like(left, { botId: id, tag: 'cafe0001', startAfter: true });
  t.true(left!.begunAt instanceof Date);
  await next.settle(left!);
  t.true(await eventually(async () => (await podsOf(`${RESTORE_TAG_LABEL}=cafe0001`)).length === 0, 120_000, 500));
  t.is((await start()).status, 200);
  t.is(await counter(id, 2), '2', 'the data as it was');

  // Killed once its swap pod was made: the next agent waits for it, and the data is the backup's.
  t.is((await stop()).status, 200);
  const scratch = await new KubeDataRestores(agentConfig, api).scratch(id, archives, { tag: 'cafe0002', startAfter: false, signal: AbortSignal.timeout(120_000) });
  const swapping = scratch.swap(AbortSignal.timeout(120_000));
  swapping.catch(() => undefined);
  t.true(await eventually(async () => (await podsOf(`${RESTORE_TAG_LABEL}=cafe0002,${RESTORE_STEP_LABEL}=swap`)).length === 1, 60_000, 100));
  const [swapLeft] = (await next.leftovers()).filter((restore) => restore.tag === 'cafe0002');
  await next.settle(swapLeft!);
  t.true(await eventually(async () => (await podsOf(DATA_HELPER_LABEL)).length === 0, 120_000, 500), 'helper pods left');
  t.is((await start()).status, 200);
  t.is(await counter(id, 42), '42', "the backup's counter, and one start more");
  t.is(await inBot(id, 'ls -a /data | tr "\\n" " "'), '. .. count');
});

// A reader that gives up (the backup folder's disk full, docs/api.md §20) ends the tar in the helper pod, and the pod goes.
test("a backup on the cluster whose folder fills up is 507, and its helper pod goes with it", async (t) => {
  t.timeout(600_000);
  const full = mkdtempSync(join(tmpdir(), 'bot-agent-kube-full-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', full]);
  // Teardowns run last first: the agent is closed before its folder's disk goes.
  t.teardown(async () => {
    await run('umount', [full]);
    rmSync(full, { recursive: true, force: true });
  });
  const { harness, namespace, agent, core, inBot, counter, create } = await dataAgent(t, mkdtempSync(join(tmpdir(), 'bot-agent-kube-full-data-')), { backupDir: full });
  const id = harness.newBotId();
  t.is((await create(id, [{ path: '/data' }])).status, 201);
  t.is(await counter(id, 1), '1');
  await inBot(id, 'head -c 4194304 /dev/urandom > /data/blob');
  const taken = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live' } });
  t.is(taken.status, 507, taken.text);
  t.regex(String(taken.body?.msg), /the disk of the agent's backup folder is full; nothing of it was kept/);
  t.true(await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: DATA_HELPER_LABEL })).items.length === 0, 60_000, 500), 'the helper pod was left');
  t.deepEqual((await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups, []);
});
