import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { TEST_ADMIN_TOKEN } from '../helpers/agent.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// The TypeScript and Python command lines back a bot's data up, list, verify and restore it (docs/api.md §20), as
// the platform does with its admin token, against the agent on the real engine.
const run = promisify(execFile);
const fixture = new DockerFixture();
const backupDir = mkdtempSync(join(tmpdir(), 'bot-agent-cli-backups-'));
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address', { config: { loopbackPlatform: false, backupDir } });
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
  rmSync(backupDir, { recursive: true, force: true });
});

const CLIS = {
  typescript: [process.execPath, '--import=tsx', 'clients/typescript/src/cli.ts'],
  python: ['python3', '-m', 'bot_agent'],
} as const;

for (const [language, [program, ...first]] of Object.entries(CLIS)) {
  test(`the ${language} command line backs up, lists, verifies and restores a bot's data`, async (t) => {
    const id = fixture.newBotId();
    t.teardown(async () => {
      await fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined);
      for (const volume of (await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } })).Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
    });
    const made = await call(agent.server, '/api/admin/bots', {
      body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/data' }] },
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    t.is(made.status, 201, made.text);
    const sh = async (script: string) => (await fixture.exec({ id, container: fixture.docker.getContainer(id) }, script)).trim();
    await sh('echo first > /data/state');
    const env = { ...process.env, BOT_ID: id, PLATFORM_AGENT_URL: `http://127.0.0.1:${(agent.server.address() as AddressInfo).port}`, BOT_AGENT_ADMIN_TOKEN: TEST_ADMIN_TOKEN, PYTHONPATH: 'clients/python/src' };
    const cli = (...args: string[]) => run(program, [...first, ...args], { env, timeout: 60_000 }).catch((err: { code: number; stdout: string; stderr: string }) => err);

    const backedUp = await cli('backup', '--live');
    t.is((backedUp as { code?: number }).code ?? 0, 0, `${backedUp.stdout}${backedUp.stderr}`);
    const backup = JSON.parse(backedUp.stdout) as { id: string; mode: string };
    t.like(backup, { mode: 'live' });
    t.deepEqual((JSON.parse((await cli('backups')).stdout) as { id: string }[]).map((kept) => kept.id), [backup.id]);
    const verified = await cli('verify', backup.id);
    t.like(JSON.parse(verified.stdout), { id: backup.id, verification: { ok: true } });

    await sh('echo second > /data/state');
    const restored = await cli('restore', backup.id);
    t.is((restored as { code?: number }).code ?? 0, 0, `${restored.stdout}${restored.stderr}`);
    t.regex(restored.stdout, new RegExp(`^bot-agent: backup ${backup.id} of bot ${id} restored into bot ${id}`));
    t.is(await sh('cat /data/state'), 'first');

    const missing = await cli('verify', 'bak_20260101T000000Z_00000000');
    t.is((missing as { code?: number }).code, 1);
    t.regex(missing.stderr, /^bot-agent: .*no backup/);
    t.is(((await cli('restore')) as { code?: number }).code, 2, 'restore without a backup id is a usage error');
    t.is(((await cli('backups', '--live')) as { code?: number }).code, 2);
  });
}
