import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';

// A backup folder whose disk fills up (docs/api.md §20): a real file system of 2 MiB (tmpfs, as root in npm test)
// and a bot with 4 MiB of random bytes. The backup fails with 507, the bot stopped for it runs again, and nothing of
// the half-made backup is listed or left on the disk.
const run = promisify(execFile);
const fixture = new DockerFixture();

test('a backup whose folder fills up is 507: nothing kept or listed, the bot stopped for it running again', async (t) => {
  await fixture.ready();
  const backupDir = await mkdtemp(join(tmpdir(), 'bot-agent-backups-full-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', backupDir]);
  const agent = await provisioningAgent(fixture, 'address', { config: { backupDir } });
  const id = fixture.newBotId();
  t.teardown(async () => {
    await agent.close();
    await fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined);
    for (const volume of (await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } })).Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
    await fixture.cleanup();
    await run('umount', [backupDir]);
    await rm(backupDir, { recursive: true, force: true });
  });
  const made = await call(agent.server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-full', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/data' }] } });
  t.is(made.status, 201, made.text);
  // Random bytes: gzip cannot shrink them under the disk's 2 MiB.
  await fixture.exec({ id, container: fixture.docker.getContainer(id) }, 'head -c 4194304 /dev/urandom > /data/blob');
  const startedBefore = (await fixture.docker.getContainer(id).inspect()).State.StartedAt;

  const full = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'stop' } });
  t.is(full.status, 507, full.text);
  t.is(full.body?.ok, false);
  t.regex(String(full.body?.msg), /the disk of the agent's backup folder is full; nothing of it was kept/);
  const state = (await fixture.docker.getContainer(id).inspect()).State;
  t.true(state.Running, 'the bot stopped for the backup runs again');
  t.not(state.StartedAt, startedBefore, 'it was stopped for it');
  t.deepEqual((await call(agent.server, `/api/admin/bots/${id}/backups`)).body?.backups, []);
  t.true(await eventually(async () => (await readdir(join(backupDir, id)).catch(() => [])).length === 0, 10_000, 200), 'nothing of the half-made backup is left on the disk');
  // With room again, the next backup is whole.
  await fixture.exec({ id, container: fixture.docker.getContainer(id) }, 'rm /data/blob; echo small > /data/note');
  const whole = await call(agent.server, `/api/admin/bots/${id}/backups`, { body: { mode: 'live' } });
  t.is(whole.status, 201, whole.text);
});
