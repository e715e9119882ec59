import test from 'ava';
import type { ExecutionContext } from 'ava';
import { BOT_LABEL, DATA_PATH_LABEL, DATA_SIZE_LABEL } from '../../src/runtime/labels.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// A bot's data (docs/api.md §19) on the real engine: a named volume per folder, kept across everything that makes
// or starts its container again, removed with the bot unless kept on request.
const fixture = new DockerFixture();
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address');
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

/** Each start of the bot adds one to the count in its data folder, then it idles. */
const COUNTER = `n=$(cat /data/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/count; ${IDLE_BOT}`;

/** The bot's volumes on the engine, by name, with the labels that tie them to it. */
async function volumesOf(botId: string): Promise<{ name: string; labels: Record<string, string> }[]> {
  const listed = await fixture.docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${botId}`] } });
  return (listed.Volumes ?? []).map((volume) => ({ name: volume.Name, labels: volume.Labels ?? {} }));
}

/** Removes what a test made of the bot: its containers, then its volumes. */
function cleanedUp(t: ExecutionContext, id: string): void {
  t.teardown(async () => {
    for (const name of [id, `${id}.undo`, `${id}.previous`]) await fixture.docker.getContainer(name).remove({ force: true }).catch(() => undefined);
    for (const { name } of await volumesOf(id)) await fixture.docker.getVolume(name).remove().catch(() => undefined);
  });
}

const create = (body: Record<string, unknown>) =>
  call(agent.server, '/api/admin/bots', { body: { user_id: 'user_9', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', COUNTER], ...body } });

/** What the bot's data folder holds, read inside its container as it runs now. */
async function read(botId: string, file: string): Promise<string> {
  return (await fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, `cat /data/${file} 2>/dev/null`)).trim();
}

/** Waits until the count is `n`: the bot has started that many times over one data folder. */
async function countReaches(t: ExecutionContext, botId: string, n: number, after: string): Promise<void> {
  const reached = await eventually(async () => (await read(botId, 'count').catch(() => '')) === String(n), 30_000, 200);
  t.true(reached, `after ${after} the count is ${await read(botId, 'count').catch((err: unknown) => String(err))}, not ${n}`);
}

async function judged(botId: string, revision: number): Promise<Record<string, unknown> | undefined> {
  let found: Record<string, unknown> | undefined;
  await eventually(async () => {
    const listed = (await call(agent.server, `/api/bots/${botId}/revisions`)).body?.revisions as Record<string, unknown>[] | undefined;
    found = listed?.find((r) => r.revision === revision);
    return found !== undefined && found.outcome !== 'deploying';
  }, 60_000, 200);
  return found;
}

test("a bot's data outlives a restart, a stop and start, a deploy, a failed deploy rolled back and a manual rollback", async (t) => {
  const id = fixture.newBotId();
  cleanedUp(t, id);
  const made = await create({ bot_id: id, data: [{ path: '/data', size_mb: 64 }] });
  t.is(made.status, 201, made.text);
  await countReaches(t, id, 1, 'the create');
  const volumes = await volumesOf(id);
  t.is(volumes.length, 1);
  t.like(volumes[0]?.labels, { [DATA_PATH_LABEL]: '/data', [DATA_SIZE_LABEL]: '64' });
  const mounted = (await fixture.docker.getContainer(id).inspect()).Mounts.map((mount) => [mount.Type, mount.Name, mount.Destination]);
  t.deepEqual(mounted, [['volume', volumes[0]?.name, '/data']]);

  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  await countReaches(t, id, 2, 'a restart');
  t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  t.is((await call(agent.server, '/api/bots/start', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  await countReaches(t, id, 3, 'a stop and a start');

  const first = (await fixture.docker.getContainer(id).inspect()).Id;
  const deployed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { env: { MODE: 'two' }, min_ready_s: 1 } });
  t.is(deployed.status, 202, deployed.text);
  t.like(await judged(id, 2), { outcome: 'succeeded' });
  t.not((await fixture.docker.getContainer(id).inspect()).Id, first, 'a new container');
  await countReaches(t, id, 4, 'a deploy');

  // A revision that writes into the data and crashes: undone, its write stays (a rollback never touches data).
  const crashing = await call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { command: ['sh', '-c', 'echo broken > /data/marker; exit 3'], min_ready_s: 5 } });
  t.is(crashing.status, 202, crashing.text);
  t.like(await judged(id, 3), { outcome: 'failed' });
  await countReaches(t, id, 5, 'a failed deploy rolled back');
  t.is(await read(id, 'marker'), 'broken');

  const back = await call(agent.server, `/api/admin/bots/${id}/rollback`, { method: 'POST' });
  t.is(back.status, 200, back.text);
  t.like(back.body, { ok: true, revision: 1 });
  await countReaches(t, id, 6, 'a manual rollback');
  t.is((await volumesOf(id)).length, 1, 'still the one volume');
});

test('a removal takes the data with the bot; with keep_data=true it stays, and a create of the bot again takes it up', async (t) => {
  const id = fixture.newBotId();
  cleanedUp(t, id);
  t.is((await create({ bot_id: id, data: [{ path: '/data' }] })).status, 201);
  await countReaches(t, id, 1, 'the create');
  const kept = await call(agent.server, `/api/admin/bots/${id}?keep_data=true`, { method: 'DELETE' });
  t.is(kept.status, 200, kept.text);
  t.is(kept.body?.message, `Bot ${id} removed; its data (/data) is kept: a create of it with the same data folders takes it up again`);
  t.is((await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0);
  t.is((await volumesOf(id)).length, 1);

  t.is((await create({ bot_id: id, data: [{ path: '/data' }] })).status, 201);
  await countReaches(t, id, 2, 'a create over the kept data');
  const removed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' });
  t.is(removed.status, 200, removed.text);
  t.is(removed.body?.message, `Bot ${id} removed, with its data (/data)`);
  t.deepEqual(await volumesOf(id), []);

  // Data kept for a bot that is not made again goes with a removal of its id, which finds no bot (404).
  t.is((await create({ bot_id: id, data: [{ path: '/data' }] })).status, 201);
  t.is((await call(agent.server, `/api/admin/bots/${id}?keep_data=true`, { method: 'DELETE' })).status, 200);
  t.is((await call(agent.server, `/api/admin/bots/${id}?keep_data=true`, { method: 'DELETE' })).status, 404);
  t.is((await volumesOf(id)).length, 1, 'kept again');
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 404);
  t.deepEqual(await volumesOf(id), []);

  // A bot without data says nothing of it.
  const plain = fixture.newBotId();
  cleanedUp(t, plain);
  t.is((await create({ bot_id: plain, command: ['sh', '-c', IDLE_BOT] })).status, 201);
  t.deepEqual(await volumesOf(plain), []);
  t.is((await call(agent.server, `/api/admin/bots/${plain}?keep_data=yes`, { method: 'DELETE' })).status, 400);
  t.like((await call(agent.server, `/api/admin/bots/${plain}`, { method: 'DELETE' })).body, { ok: true, message: `Bot ${plain} removed` });
});

test('a failed create removes the volumes it made, and never one it found', async (t) => {
  const id = fixture.newBotId();
  cleanedUp(t, id);
  // The engine makes the container, and its start fails: nothing of the bot stays.
  const failed = await create({ bot_id: id, command: ['/no/such/program'], data: [{ path: '/data' }, { path: '/var/lib/bot' }] });
  t.true(failed.status >= 400, failed.text);
  t.false(failed.body?.ok);
  t.deepEqual(await volumesOf(id), []);
  t.is((await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0);

  // Kept data, then a create that fails: the kept volume stays with its files.
  t.is((await create({ bot_id: id, data: [{ path: '/data' }] })).status, 201);
  await countReaches(t, id, 1, 'the create');
  t.is((await call(agent.server, `/api/admin/bots/${id}?keep_data=true`, { method: 'DELETE' })).status, 200);
  const again = await create({ bot_id: id, command: ['/no/such/program'], data: [{ path: '/data' }] });
  t.true(again.status >= 400, again.text);
  t.is((await volumesOf(id)).length, 1, 'the kept volume');
  t.is((await create({ bot_id: id, data: [{ path: '/data' }] })).status, 201);
  await countReaches(t, id, 2, 'a create over the kept data');

  // A create of a bot that exists (409) makes no volume, and removes none of the bot's.
  const twice = await create({ bot_id: id, data: [{ path: '/data' }, { path: '/srv' }] });
  t.is(twice.status, 409, twice.text);
  t.deepEqual((await volumesOf(id)).map((volume) => volume.labels[DATA_PATH_LABEL]), ['/data']);
});

test('data folders that break a rule are 422 naming the field, a wrong shape is 400, and neither makes anything', async (t) => {
  const cases: [unknown, number, RegExp][] = [
    [[{ path: 'data' }], 422, /^data\[0\]\.path must be an absolute path/],
    [[{ path: '/' }], 422, /^data\[0\]\.path must not be \//],
    [[{ path: '/proc/self' }], 422, /^data\[0\]\.path must not be under \/proc/],
    [[{ path: '/sys' }], 422, /under \/sys/],
    [[{ path: '/dev/shm' }], 422, /under \/dev/],
    [[{ path: '/data/../etc' }], 422, /^data\[0\]\.path must be written plainly/],
    [[{ path: '/data/' }], 422, /written plainly/],
    [[{ path: '/a:b' }], 422, /must not hold control characters, : or ,/],
    [[{ path: `/${'x'.repeat(300)}` }], 422, /at most 255 characters/],
    [[{ path: '/data' }, { path: '/data' }], 422, /^data folders must not repeat or hold one another: \/data twice$/],
    [[{ path: '/data' }, { path: '/data/db' }], 422, /\/data and \/data\/db$/],
    [[{ path: '/data', size_mb: 0 }], 422, /^data\[0\]\.size_mb must be a whole number of MiB from 1 to 1048576$/],
    [[{ path: '/data', size_mb: 1.5 }], 422, /size_mb must be a whole number/],
    [[{ path: '/data', size_mb: 2_000_000 }], 422, /size_mb must be a whole number/],
    [[{ path: '/a' }, { path: '/b' }, { path: '/c' }, { path: '/d' }, { path: '/e' }], 422, /^data must name at most 4 folders$/],
    ['/data', 400, /^data must be a list of folders/],
    [[{ path: 5 }], 400, /path must be a string/],
    [[{}], 400, /path is required/],
    [[{ path: '/data', size_mb: '64' }], 400, /size_mb must be a whole number of MiB/],
    [[{ path: '/data', sizeMb: 64 }], 400, /data\[\] takes path and size_mb only/],
  ];
  for (const [data, status, msg] of cases) {
    const id = fixture.newBotId();
    const reply = await create({ bot_id: id, data });
    t.is(reply.status, status, `${JSON.stringify(data).slice(0, 80)}: ${reply.text}`);
    t.false(reply.body?.ok);
    t.regex(String(reply.body?.msg), msg);
    t.deepEqual(await volumesOf(id), []);
    t.is((await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0);
  }
});
