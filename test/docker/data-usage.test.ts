import test from 'ava';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { openStream } from '../helpers/sse-client.js';

// The bytes a bot's data folders use (docs/api.md §19), measured by the real engine's disk usage for every bot at
// once, shown in the bot's status; a folder past its size_mb is told once as it crosses it.
const fixture = new DockerFixture();
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address', { dataUsage: { firstMs: 200, everyMs: 1_000 } });
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

interface DataFolder {
  path: string;
  size_mb: number | null;
  used_bytes: number | null;
  measured_at: string | null;
}

test("a data folder's bytes are measured and shown in its bot's status; past its size_mb it is told once, and again after it fell back under", async (t) => {
  const id = fixture.newBotId();
  t.teardown(async () => {
    await fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined);
    for (const volume of (await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } })).Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
  });
  const made = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/data', size_mb: 1 }, { path: '/cache' }] },
  });
  t.is(made.status, 201, made.text);
  const events = await openStream(agent.server, `/api/bots/${id}/events`);
  t.teardown(() => events.close());
  const sh = (script: string) => fixture.exec({ id, container: fixture.docker.getContainer(id) }, script);
  const folders = async () => ((await call(agent.server, `/api/bots/${id}`)).body?.bot as { data: DataFolder[] }).data;
  t.deepEqual((await folders()).map((folder) => folder.path), ['/cache', '/data']);

  await sh('head -c 2097152 /dev/zero > /data/big');
  let seen: DataFolder[] = [];
  t.true(await eventually(async () => ((seen = await folders()).find((folder) => folder.path === '/data')?.used_bytes ?? 0) >= 2_097_152, 30_000, 250), JSON.stringify(seen));
  t.like(seen.find((folder) => folder.path === '/data'), { size_mb: 1 });
  t.like(seen.find((folder) => folder.path === '/cache'), { size_mb: null });
  const over = await events.next((event) => event.event === 'data-over-size', 30_000);
  t.like(over.data, { path: '/data', size_mb: 1 });
  t.true(Number(over.data.used_bytes) >= 2_097_152);
  // Measured again and again while it stays past: told once.
  const measuredAt = seen.find((folder) => folder.path === '/data')?.measured_at;
  t.true(await eventually(async () => (await folders()).find((folder) => folder.path === '/data')?.measured_at !== measuredAt, 30_000, 250));
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  t.is(events.events.filter((event) => event.event === 'data-over-size').length, 1);

  await sh('rm /data/big');
  t.true(await eventually(async () => ((await folders()).find((folder) => folder.path === '/data')?.used_bytes ?? Infinity) < 1_048_576, 30_000, 250));
  await sh('head -c 2097152 /dev/zero > /data/again');
  t.true(await eventually(() => events.events.filter((event) => event.event === 'data-over-size').length === 2, 30_000, 250), 'told again after it fell back under');
});
