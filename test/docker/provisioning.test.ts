import type { AddressInfo } from 'node:net';
import test from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import { listen } from '../../src/http/listen.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { call } from '../helpers/http-client.js';
import { freePort } from '../helpers/free-port.js';
import { eventually } from '../helpers/eventually.js';
import type { Server } from 'node:http';
import type { StoredEvent } from '../../src/history/history-store.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { lineSink } from '../helpers/log-sink.js';
import { REGISTRY_LOGIN, testRegistry } from '../helpers/registry.js';

// The platform creates, lists and removes bots on the real engine; bots may not.
const fixture = new DockerFixture();
const TOKEN = 'tok-0123456789-secret-never-shown';
const logLines: string[] = [];
const events: StoredEvent[] = [];
let server: Server;
const driver = createDockerDriver({ dockerHost: fixture.dockerHost });

test.before(async () => {
  await fixture.ready();
  const network = (await fixture.network()).name;
  const { app, history } = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network, agentUrl: 'http://agent:8000', registries: [testRegistry(), 'docker.io'] }),
    config: TEST_APP_CONFIG,
    logger: pino(lineSink(logLines)),
    // On an engine other test files share: no restarts of their bots.
    watchdog: 'off',
  });
  history.follow((event) => events.push(event));
  server = await listen(app, '0.0.0.0', 0);
});

test.after.always(async () => {
  server?.close();
  await driver.close();
  await fixture.cleanup();
});

/** A bot created through the API, removed again when the test ends. */
async function create(t: { teardown(fn: () => Promise<void>): void }, extra: Record<string, unknown> = {}) {
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const body = { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: TOKEN, command: ['sleep', '1000'], ...extra };
  return { id, reply: await call(server, '/api/admin/bots', { body }) };
}

const envOf = async (id: string): Promise<Record<string, string>> =>
  Object.fromEntries(
    ((await fixture.docker.getContainer(id).inspect()).Config.Env ?? []).map((entry) => {
      const at = entry.indexOf('=');
      return [entry.slice(0, at), entry.slice(at + 1)];
    }),
  );

test('create makes the bot with every variable of docs/api.md §6, its labels and limits, and starts it', async (t) => {
  const { id, reply } = await create(t, { domain: 'bot.example.com', port: 3000, env: { LOG_LEVEL: 'debug' }, memory_limit: 64 * 1024 * 1024, cpu_limit: 0.5 });
  t.is(reply.status, 201, reply.text);
  t.like(reply.body, { ok: true });
  const info = await fixture.docker.getContainer(id).inspect();
  t.true(info.State.Running);
  t.like(info.Config.Labels, { 'bot-agent/bot-id': id, 'bot-agent/user-id': 'user_9', 'bot-agent/template': 'telegram' });
  t.like(info.HostConfig, { Memory: 64 * 1024 * 1024, NanoCpus: 500_000_000, RestartPolicy: { Name: 'unless-stopped' } });
  t.deepEqual(Object.keys(info.NetworkSettings.Networks), [(await fixture.network()).name]);
  const env = await envOf(id);
  t.like(env, {
    BOT_ID: id,
    USER_ID: 'user_9',
    TEMPLATE: 'telegram',
    PORT: '3000',
    DOMAIN: 'bot.example.com',
    PLATFORM_AGENT_URL: 'http://agent:8000',
    LOG_LEVEL: 'debug',
  });
  for (const alias of ['BOT_TOKEN', 'DISCORD_TOKEN', 'DISCORD_BOT_TOKEN', 'TELEGRAM_BOT_TOKEN', 'TOKEN', 'API_TOKEN']) {
    t.is(env[alias], TOKEN, alias);
  }
  // Its stats say what their memory percentage is taken against: its limit.
  const stats = await call(server, `/api/bots/${id}/stats`);
  t.like(stats.body, { ok: true, stats: { memory_limit_bytes: 64 * 1024 * 1024 } }, stats.text);
});

// Stats carry the run's network and block I/O as `docker stats` counts them (docs/api.md §2).
test("a bot's stats count the network traffic it makes, and its block I/O, in bytes", async (t) => {
  // Twenty connections tried to a closed port of its gateway: a SYN of at least 54 bytes out, a reset back, each.
  // (Not ping: the bot has no raw sockets.)
  const { gateway } = await fixture.network();
  const { id, reply } = await create(t, { command: ['sh', '-c', `sleep 1; for i in $(seq 20); do nc -w 1 ${gateway} 9 </dev/null; done; sleep 1000`] });
  t.is(reply.status, 201, reply.text);
  let stats: Record<string, unknown> = {};
  const counted = await eventually(async () => {
    stats = ((await call(server, `/api/bots/${id}/stats`)).body?.stats ?? {}) as Record<string, unknown>;
    return Number(stats.network_tx_bytes) >= 20 * 54 && Number(stats.network_rx_bytes) >= 20 * 54;
  }, 20_000, 250);
  t.true(counted, JSON.stringify(stats));
  t.true(Number.isInteger(stats.block_read_bytes) && Number.isInteger(stats.block_write_bytes), JSON.stringify(stats));
});

test('DOMAIN is absent when no domain is given, and PORT has a default', async (t) => {
  const { id, reply } = await create(t);
  t.is(reply.status, 201);
  const env = await envOf(id);
  t.false('DOMAIN' in env);
  t.is(env.PORT, '8080');
});

test('a second create of the same bot id is a 409', async (t) => {
  const { id } = await create(t);
  const again = await call(server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: TOKEN },
  });
  t.is(again.status, 409);
  t.regex(String(again.body?.msg), /exists/);
});

test('bad input is a 400 naming the field; an image the engine lacks is a 400', async (t) => {
  const base = { bot_id: fixture.newBotId(), user_id: 'u', image: TEST_IMAGE, template: 'telegram', token: 'x' };
  for (const [change, msg] of [
    [{ image: 'has spaces' }, /image must be/],
    [{ template: 'Tele Gram' }, /template must be/],
    [{ env: { BOT_TOKEN: 'override' } }, /env must be/],
    [{ port: 70000 }, /port must be/],
    [{ token: undefined }, /token is required/],
  ] as const) {
    const reply = await call(server, '/api/admin/bots', { body: { ...base, ...change } });
    t.is(reply.status, 400, JSON.stringify(change));
    t.regex(String(reply.body?.msg), msg);
  }
  // An image neither the engine nor its registry holds (the test registry on loopback: no pull leaves the machine).
  const image = `${testRegistry()}/tests/no-such-image:404`;
  const missing = await call(server, '/api/admin/bots', { body: { ...base, image, registry_auth: REGISTRY_LOGIN } });
  t.is(missing.status, 422, 'a well-formed request the engine cannot carry out is no malformed input');
  t.regex(String(missing.body?.msg), /^image \S+\/tests\/no-such-image:404 was not found in its registry/);
});

test('what the engine refuses to run is a 422 saying why (malformed input a 400), and leaves no container behind (was a 500, then a stopped bot)', async (t) => {
  for (const [change, status, msg] of [
    [{ image: 'Bot-Agent/Upper' }, 400, /image must be an image reference/],
    [{ cpu_limit: 200 }, 422, /cannot run as asked: .*CPU/i],
    [{ command: ['/no/such/program'] }, 422, /cannot run as asked: .*no such file/i],
    [{ token: 'a\u0000b' }, 400, /token must not contain a NUL/],
    // Found by schemathesis: the engine cannot read a number past int64 (it answered 500).
    [{ memory_limit: 4.6107539383909726e24 }, 400, /memory_limit must be a whole number of bytes from 6 MiB to 1 PiB/],
  ] as const) {
    const id = fixture.newBotId();
    t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
    const body: Record<string, unknown> = { bot_id: id, user_id: 'u', image: TEST_IMAGE, template: 'telegram', token: 'x' };
    Object.assign(body, change);
    const reply = await call(server, '/api/admin/bots', { body });
    t.is(reply.status, status, JSON.stringify(change));
    t.regex(String(reply.body?.msg), msg, JSON.stringify(change));
    t.deepEqual(await fixture.docker.listContainers({ all: true, filters: { name: [id] } }), [], JSON.stringify(change));
  }
});

test('a network the engine lacks is named as such, not as a missing image', async (t) => {
  const provisioner = createDockerProvisioner({ dockerHost: fixture.dockerHost, network: 'bot-agent-no-such-network', agentUrl: 'http://agent:8000' });
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const spec = { id, ownerId: 'u', image: TEST_IMAGE, template: 'telegram', token: 'x', domain: undefined, port: undefined, env: {}, memoryLimitBytes: undefined, cpuLimit: undefined, command: undefined };
  const error = await t.throwsAsync(provisioner.create(spec));
  t.regex(String(error?.message), /Failed to create bot .*network bot-agent-no-such-network not found/);
  t.notRegex(String(error?.message), /image/);
});

test('the listing shows id, owner, template, state and start, filters by owner, and never the token', async (t) => {
  const { id } = await create(t);
  const all = await call(server, '/api/admin/bots');
  t.is(all.status, 200);
  t.like((all.body?.bots as Array<{ bot_id: string }>).find((bot) => bot.bot_id === id), {
    user_id: 'user_9',
    template: 'telegram',
    state: 'running',
  });
  const mine = await call(server, '/api/admin/bots?user_id=user_9');
  t.true((mine.body?.bots as Array<{ user_id: string }>).every((bot) => bot.user_id === 'user_9'));
  const none = await call(server, '/api/admin/bots?user_id=nobody_here');
  t.deepEqual(none.body?.bots, []);
  t.notRegex(all.text, new RegExp(TOKEN));
});

test('delete removes the bot; deleting it again is a 404', async (t) => {
  const { id } = await create(t);
  t.like(await call(server, `/api/admin/bots/${id}`, { method: 'DELETE' }), { status: 200, body: { ok: true } });
  await t.throwsAsync(fixture.docker.getContainer(id).inspect());
  t.is((await call(server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 404);
});

test('a bot cannot create, list or remove bots', async (t) => {
  const { id } = await create(t);
  const bot = await fixture.runBot();
  const target = { host: (await fixture.network()).gateway, port: (server.address() as AddressInfo).port };
  const newId = fixture.newBotId();
  for (const attempt of [
    { method: 'POST', path: '/api/admin/bots', body: { bot_id: newId, user_id: 'u', image: TEST_IMAGE, template: 'x', token: 't' } },
    { method: 'GET', path: '/api/admin/bots' },
    { method: 'DELETE', path: `/api/admin/bots/${id}` },
  ]) {
    const reply = await fixture.httpFromBot(bot, target, attempt);
    t.is(reply.status, 403, `${attempt.method} ${attempt.path}: ${reply.raw}`);
    t.regex(String(reply.body?.msg), /only the platform/);
  }
  await t.throwsAsync(fixture.docker.getContainer(newId).inspect());
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running);
});

test.after('the token appears in no log line', (t) => {
  t.true(logLines.length > 0);
  t.false(logLines.some((line) => line.includes(TOKEN)));
});

test('a created bot runs without NET_RAW or a way to gain privileges, under a process limit, with its log rotated', async (t) => {
  const { id, reply } = await create(t);
  t.is(reply.status, 201, reply.text);
  const info = await fixture.docker.getContainer(id).inspect();
  t.like(info.HostConfig, { CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'], PidsLimit: 512 });
  t.false(info.HostConfig.CapAdd?.includes('NET_RAW'));
  t.like(info.HostConfig.LogConfig, { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } });
  // What the bot's own process has, as the kernel says.
  const status = await fixture.exec({ id, container: fixture.docker.getContainer(id) }, 'cat /proc/1/status');
  const effective = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1] ?? 'ffffffffff'}`);
  const NET_RAW = 13n;
  t.is((effective >> NET_RAW) & 1n, 0n, 'no NET_RAW: the bot cannot forge another bot address');
  t.regex(status, /^NoNewPrivs:\s*1$/m);
  const pidsMax = await fixture.exec({ id, container: fixture.docker.getContainer(id) }, 'cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max');
  t.is(pidsMax.trim(), '512');
});

test('a removed bot takes its exit records and events with it: a new bot under its id starts with none', async (t) => {
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const first = { bot_id: id, user_id: 'user_old', image: TEST_IMAGE, template: 'telegram', token: TOKEN, command: ['sh', '-c', 'echo secret of the old owner; sleep 1; exit 3'] };
  t.is((await call(server, '/api/admin/bots', { body: first })).status, 201);
  const exits = async () => ((await call(server, `/api/bots/${id}/exits`)).body?.exits as unknown[] | undefined) ?? [];
  await eventually(async () => (await exits()).length >= 2, 30_000);
  t.is((await call(server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  const second = { ...first, user_id: 'user_new', command: ['sleep', '1000'] };
  t.is((await call(server, '/api/admin/bots', { body: second })).status, 201);
  // Late reports of the old container's end (its kill and death come as it is removed) must not come back either.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  t.deepEqual(await exits(), []);
  const status = await call(server, `/api/bots/${id}`);
  t.like(status.body?.bot, { user_id: 'user_new', last_exit: null, crashes_last_hour: 0, state: 'running' });
  t.notRegex(status.text + JSON.stringify(await exits()), /secret of the old owner/);
});

test("a bot made on the engine's default bridge (as under npm start) reaches its agent at PLATFORM_AGENT_URL's `agent`, and is itself there", async (t) => {
  const port = await freePort();
  const { app, close } = assembleAgent({
    driver: createDockerDriver({ dockerHost: fixture.dockerHost }),
    // No network named: the engine's default bridge, where no name but a container's own resolves.
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network: undefined, agentUrl: `http://agent:${port}` }),
    config: TEST_APP_CONFIG,
    logger: pino({ level: 'silent' }),
    watchdog: 'off',
  });
  const server = await listen(app, '0.0.0.0', port);
  t.teardown(async () => {
    server.close();
    await close();
  });
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const made = await call(server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: TOKEN, command: ['sleep', '1000'] } });
  t.is(made.status, 201, made.text);
  const info = await fixture.docker.getContainer(id).inspect();
  t.is(info.HostConfig.NetworkMode, 'default');
  t.true(info.Config.Env.includes(`PLATFORM_AGENT_URL=http://agent:${port}`));
  // From inside the bot, by the name its environment gives: its own stats, as itself.
  const reply = await fixture.httpFromBot({ id, container: fixture.docker.getContainer(id) }, { host: 'agent', port }, { method: 'GET', path: `/api/bots/${id}/stats` });
  t.is(reply.status, 200, reply.raw);
  t.like(reply.body, { ok: true });
  const other = await fixture.httpFromBot({ id, container: fixture.docker.getContainer(id) }, { host: 'agent', port }, { method: 'GET', path: `/api/bots/${fixture.newBotId()}/stats` });
  t.is(other.status, 403, 'another bot is refused: the caller is known by its address');
});

test('`init`: a bot whose first process is a shell ends at the stop\'s SIGTERM, not its SIGKILL, and a move would carry it', async (t) => {
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  // A shell as the first process ignores SIGTERM (docs/api.md §2): without init the stop waits its 10 s, then kills.
  const made = await call(server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: TOKEN, command: ['sh', '-c', 'while :; do sleep 1; done'], init: true } });
  t.is(made.status, 201, made.text);
  t.is((await fixture.docker.getContainer(id).inspect()).HostConfig.Init, true);
  t.is((await call(server, '/api/bots/stop', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  const exits = async () => (await call(server, `/api/bots/${id}/exits`)).body?.exits as { exit_code: number | null; signal: string | null; requested: boolean }[];
  t.true(await eventually(async () => (await exits()).length === 1, 15_000, 100));
  t.like((await exits())[0], { exit_code: 143, signal: 'SIGTERM', requested: true });
  t.is((await call(server, '/api/admin/bots', { body: { bot_id: fixture.newBotId(), user_id: 'u', image: TEST_IMAGE, template: 'x', token: 't', init: 'yes' } })).status, 400);
});

test("the bots' list pages: `limit` bots at a time in the order of their ids, `after` the last one's, with the total", async (t) => {
  const owner = `user_pages_${fixture.runId}`;
  const ids = [fixture.newBotId(), fixture.newBotId(), fixture.newBotId()].sort();
  for (const id of ids) {
    t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
    const made = await call(server, '/api/admin/bots', { body: { bot_id: id, user_id: owner, image: TEST_IMAGE, template: 'telegram', token: TOKEN, command: ['sleep', '1000'] } });
    t.is(made.status, 201, made.text);
  }
  const page = async (query: string) => (await call(server, `/api/admin/bots?user_id=${owner}${query}`)).body as { total: number; bots: { bot_id: string }[]; next?: string };
  const first = await page('&limit=2');
  t.like(first, { total: 3, next: ids[1] });
  t.deepEqual(first.bots.map((bot) => bot.bot_id), ids.slice(0, 2));
  const second = await page(`&limit=2&after=${first.next}`);
  t.deepEqual(second.bots.map((bot) => bot.bot_id), ids.slice(2));
  t.like(second, { total: 3, next: undefined });
  const all = await page('');
  t.deepEqual(all.bots.map((bot) => bot.bot_id), ids);
  t.like(all, { total: 3, next: undefined });
  for (const [query, field] of [['limit=0', 'limit'], ['limit=1001', 'limit'], ['limit=two', 'limit'], ['after=not-a-bot', 'after']] as const) {
    const refused = await call(server, `/api/admin/bots?${query}`);
    t.is(refused.status, 400, query);
    t.regex(String(refused.body?.msg), new RegExp(field));
  }
});

test('with AGENT_PROVISIONING=off, create and remove are refused with a 403 and the listing stays', async (t) => {
  const { app, close } = assembleAgent({
    driver: createDockerDriver({ dockerHost: fixture.dockerHost }),
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network: (await fixture.network()).name, agentUrl: 'http://agent:8000' }),
    config: { ...TEST_APP_CONFIG, provisioning: false },
    logger: pino({ level: 'silent' }),
    // On an engine other test files share: no restarts of their bots.
    watchdog: 'off',
  });
  const off = await listen(app, '127.0.0.1', 0);
  t.teardown(async () => {
    off.close();
    await close();
  });
  const bot = await fixture.runBot();
  const newId = fixture.newBotId();
  const made = await call(off, '/api/admin/bots', { body: { bot_id: newId, user_id: 'u', image: TEST_IMAGE, template: 'x', token: 't' } });
  t.is(made.status, 403);
  t.regex(String(made.body?.msg), /provisioning is off/);
  await t.throwsAsync(fixture.docker.getContainer(newId).inspect());
  const removed = await call(off, `/api/admin/bots/${bot.id}`, { method: 'DELETE' });
  t.is(removed.status, 403);
  t.true(await fixture.running(bot));
  t.is((await call(off, '/api/admin/bots')).status, 200);
});

test('a bot that crashes past its restart policy is stopped and given up on, says so, and runs again once started through the agent', async (t) => {
  const { id, reply } = await create(t, { command: ['sh', '-c', 'echo crashing; exit 3'], restart_policy: { max_crashes: 2, window_s: 600 } });
  t.is(reply.status, 201, reply.text);
  t.like((await fixture.docker.getContainer(id).inspect()).Config.Labels, { 'bot-agent/restart-max-crashes': '2', 'bot-agent/restart-window-s': '600', 'bot-agent/restart-backoff-s': '' });
  t.true(await eventually(async () => ((await call(server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined)?.state === 'given-up', 60_000), 'never given up on');
  const givenUp = events.filter((event) => event.botId === id && event.type === 'given-up');
  t.is(givenUp.length, 1);
  t.like(JSON.parse(givenUp[0]!.data), { crashes: 2, window_s: 600, max_crashes: 2 });
  // Stopped for good: the engine's own restart policy does not bring it back.
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const info = await fixture.docker.getContainer(id).inspect();
  t.false(info.State.Running, 'the engine started it again');
  t.like((await call(server, `/api/bots/${id}`)).body?.bot, { state: 'given-up', started_at: null });
  t.is(events.filter((event) => event.botId === id && event.type === 'given-up').length, 1);

  const started = await call(server, '/api/bots/start', { body: { bot_id: id, user_id: 'user_9' } });
  t.is(started.status, 200, started.text);
  const state = ((await call(server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined)?.state;
  t.not(state, 'given-up', 'a start through the agent ends the give-up');
  // Its whole budget again: given up on once more after two new crashes, the earlier ones not counted.
  const exitsBefore = events.filter((event) => event.botId === id && event.type === 'exited').length;
  t.true(await eventually(() => events.filter((event) => event.botId === id && event.type === 'given-up').length === 2, 60_000), 'not given up on again');
  const again = events.filter((event) => event.botId === id && event.type === 'given-up')[1]!;
  t.like(JSON.parse(again.data), { crashes: 2 });
  const crashesSince = events.filter((event) => event.botId === id && event.type === 'exited' && event.seq < again.seq).length - exitsBefore;
  t.true(crashesSince >= 2, `given up on after ${crashesSince} crash(es) since the start`);
});

test('a restart policy out of bounds is a 400 naming the field', async (t) => {
  for (const [policy, words] of [
    [{ max_crashes: 0 }, 'restart_policy.max_crashes'],
    [{ window_s: 5 }, 'restart_policy.window_s'],
    [{ backoff_max_s: 86_401 }, 'restart_policy.backoff_max_s'],
    ['often', 'restart_policy must be an object'],
  ] as const) {
    const { reply } = await create(t, { restart_policy: policy });
    t.is(reply.status, 400, JSON.stringify(policy));
    t.regex(String(reply.body?.msg), new RegExp(words.replaceAll('.', '\\.')), JSON.stringify(policy));
  }
});
