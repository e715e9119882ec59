import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { BOT_LABEL, DATA_PATH_LABEL, DATA_SIZE_LABEL, RESTORE_OF_LABEL, RESTORE_STEP_LABEL } from '../../src/runtime/labels.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { killAtEngineEvent } from '../helpers/engine-events.js';
import { fleetNodeEnv } from '../helpers/fleet-node-env.js';
import { freePort } from '../helpers/free-port.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { PrivateEngine } from '../helpers/private-engine.js';
import { SocketProxy } from '../helpers/socket-proxy.js';
import { openStream } from '../helpers/sse-client.js';

// A move fenced by the fleet's placement (docs/api.md §17, docs/fleet.md): two nodes, each an agent as operators
// run it (src/main.ts) beside an engine of this file's own, over one PostgreSQL. The new node's agent is SIGKILLed
// at its engine's create, or its start, of the moved bot; copies are counted from the engines themselves.
const fixture = new DockerFixture();
const engines = { 'node-b': new PrivateEngine('fence-b'), 'node-c': new PrivateEngine('fence-c') };
type NodeName = keyof typeof engines;
/** node-c's agent reaches its engine through this proxy, which can hold the engine's answers back from it. */
const nodeCEngine = new SocketProxy(engines['node-c'].socket);
const FLEET_KEY = 'fence-key-0123456789abcdef0123456789abcdef';
/** Under identity by token, the platform is who holds the admin token (docs/api.md §4). */
const ADMIN_TOKEN = 'fence-admin-0123456789abcdef0123456789ab';
/** An image name of this file's own: node-c's engine may hold another image under it. */
const PINNED_REPO = 'bot-agent-fence';
const PINNED = `${PINNED_REPO}:v1`;

interface NodeAgent {
  port: number;
  env: Record<string, string>;
  agent: Awaited<ReturnType<typeof runAgentProcess>>;
}
const agents = {} as Record<NodeName, NodeAgent>;
const dataDirs: string[] = [];

async function startNode(name: NodeName, port: number, databaseUrl: string): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), `bot-agent-fence-${name}-`));
  dataDirs.push(dataDir);
  const env = {
    ...fleetNodeEnv({ name, port, dataDir, databaseUrl, fleetKey: FLEET_KEY, dockerHost: name === 'node-c' ? nodeCEngine.dockerHost : engines[name].dockerHost }),
    AGENT_BOTS_NETWORK: 'none',
    AGENT_RATE_LIMIT: '1000',
    // A bot's token names it (docs/api.md §4, rule 8): the running bot's own calls show whether a removal reached it.
    AGENT_IDENTITY: 'token',
    AGENT_ADMIN_TOKEN: ADMIN_TOKEN,
    // Each node keeps its bots' output (docs/api.md §21): a moved bot's is found from either node.
    AGENT_LOG_HISTORY: 'on',
  };
  agents[name] = { port, env, agent: await runAgentProcess(env) };
}

/** The node's agent, started again as it was (its port, its data). */
async function restart(name: NodeName): Promise<void> {
  agents[name].agent = await runAgentProcess(agents[name].env);
}

const api = (name: NodeName, path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
  fetch(`http://127.0.0.1:${agents[name].port}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: AbortSignal.timeout(90_000),
  }).then(async (reply) => ({ status: reply.status, body: (await reply.json().catch(() => undefined)) as Record<string, unknown> | undefined }));

/** The nodes whose engine runs a copy of the bot, one entry per running copy. */
async function runningOn(id: string): Promise<NodeName[]> {
  const found: NodeName[] = [];
  for (const [name, engine] of Object.entries(engines) as [NodeName, PrivateEngine][]) {
    const listed = await engine.docker().listContainers({ filters: { label: [`${BOT_LABEL}=${id}`] } });
    for (const _ of listed) found.push(name);
  }
  return found;
}

/** Exactly one running copy, on `where`, and still so 8 s on (longer than an agent's look at the placements). */
async function exactlyOneOn(t: ExecutionContext, id: string, where: NodeName): Promise<void> {
  const one = async () => JSON.stringify(await runningOn(id)) === JSON.stringify([where]);
  t.true(await eventually(one, 30_000, 200), `running on ${JSON.stringify(await runningOn(id))}, not on ${where} alone`);
  const until = Date.now() + 8_000;
  while (Date.now() < until) {
    const now = await runningOn(id);
    if (JSON.stringify(now) !== JSON.stringify([where])) {
      t.fail(`running on ${JSON.stringify(now)} later`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Calls `seen` at each `action` of the bot's container that node-c's engine reports from now on. Not awaited: the
 * engine sends its answer's head only with its first event; `since` replays what came before the stream.
 */
function onNodeCEvents(t: ExecutionContext, id: string, action: 'create' | 'start', seen: () => void): void {
  const since = Math.floor(Date.now() / 1_000) - 1;
  void engines['node-c'].docker().getEvents({ since, filters: { type: ['container'], event: [action], label: [`${BOT_LABEL}=${id}`] } }).then((events) => {
    const stream = events as NodeJS.ReadableStream & { destroy(): void };
    t.teardown(() => stream.destroy());
    stream.on('data', seen);
  });
}

/**
 * Kills node-c's agent the moment its engine reports `action` for the bot's container. The engine's answer to
 * that call is held back from the agent meanwhile, so the agent never learns the call succeeded before it dies.
 * Whatever the test's end, node-c's agent runs again for the next test.
 */
function killNodeCAt(t: ExecutionContext, id: string, action: 'create' | 'start'): Promise<void> {
  nodeCEngine.delayAnswers(action === 'create' ? new RegExp(`^POST \\S*/containers/create\\?name=${id}\\b`) : /^POST \S*\/containers\/\S+\/start\b/, 10_000);
  t.teardown(async () => {
    nodeCEngine.undelay();
    const { process } = agents['node-c'].agent;
    if (process.exitCode !== null || process.signalCode !== null) await restart('node-c');
  });
  return new Promise<void>((resolve) => {
    onNodeCEvents(t, id, action, () => {
      agents['node-c'].agent.process.kill('SIGKILL');
      nodeCEngine.undelay();
      resolve();
    });
  });
}

async function createOnB(t: ExecutionContext, id: string, image = TEST_IMAGE, extra: Record<string, unknown> = {}): Promise<void> {
  const made = await api('node-b', '/api/admin/bots', { body: { bot_id: id, user_id: 'user_7', image, template: 'discord', token: 'tok-fence', command: ['sh', '-c', IDLE_BOT], ...extra } });
  t.is(made.status, 201, JSON.stringify(made.body));
  // node-c's agent passes calls on only once node-b's row names the bot.
  t.true(await eventually(async () => (await api('node-c', `/api/bots/${id}`)).status === 200, 20_000, 200), 'node-c never learnt where the bot is');
}

const envOf = async (name: NodeName, id: string): Promise<Map<string, string>> =>
  new Map(((await engines[name].docker().getContainer(id).inspect()).Config.Env ?? []).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));

test.before(async () => {
  await fixture.ready();
  await Promise.all(Object.values(engines).map((engine) => engine.start()));
  await nodeCEngine.start();
  await Promise.all(Object.values(engines).map((engine) => engine.withTestImage(fixture.docker)));
  await engines['node-b'].docker().getImage(TEST_IMAGE).tag({ repo: PINNED_REPO, tag: 'v1' });
  const databaseUrl = await freshDatabase();
  await startNode('node-b', await freePort(), databaseUrl);
  await startNode('node-c', await freePort(), databaseUrl);
});

test.after.always(async () => {
  for (const { agent } of Object.values(agents)) agent.process.kill('SIGKILL');
  await nodeCEngine.close();
  await Promise.all(Object.values(engines).map((engine) => engine.destroy()));
  await Promise.all(dataDirs.map((dir) => rm(dir, { recursive: true, force: true })));
  await fixture.cleanup();
  await dropDatabases();
});

test.serial("a move whose new node's agent is killed at its engine's create: one copy runs, the old one; removing the leftover touches nothing of the bot's", async (t) => {
  const id = fixture.newBotId();
  await createOnB(t, id);
  const token = (await envOf('node-b', id)).get('PLATFORM_AGENT_TOKEN');
  t.truthy(token);
  const killed = killNodeCAt(t, id, 'create');
  const moved = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  await killed;
  t.is(moved.status, 503, JSON.stringify(moved.body));
  t.regex(String(moved.body?.msg), new RegExp(`bot ${id} stays on node node-b`));
  await restart('node-c');
  await exactlyOneOn(t, id, 'node-b');
  // Its engine made the container before it said so: the leftover copy, stopped.
  t.false((await engines['node-c'].docker().getContainer(id).inspect()).State.Running);
  // Removed as docs/fleet.md says: at the leftover's own agent, that copy alone.
  const removed = await api('node-c', `/api/admin/bots/${id}`, { method: 'DELETE' });
  t.is(removed.status, 200, JSON.stringify(removed.body));
  t.is(removed.body?.message, `Bot ${id}'s leftover copy removed from node node-c: the bot is placed on node node-b, and stays there`);
  t.is((await engines['node-c'].docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0);
  // The running bot is untouched: its own token, its records, and every agent's answer for it.
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  const asBot = await api('node-b', `/api/bots/${id}`, { headers: { authorization: `Bot ${token}` } });
  t.is(asBot.status, 200, JSON.stringify(asBot.body));
  t.like((await api('node-c', `/api/bots/${id}`)).body, { ok: true, bot: { bot_id: id, node: 'node-b', state: 'running' } });
  const exits = await api('node-c', `/api/bots/${id}/exits`);
  t.is((exits.body?.exits as unknown[] | undefined)?.length, 1, 'the stop for the move is the bot\'s record, kept');
  await exactlyOneOn(t, id, 'node-b');
});

test.serial("a move whose new node's agent is killed at its engine's start: the old copy never runs again, and the new one runs once its agent is back", async (t) => {
  const id = fixture.newBotId();
  await createOnB(t, id);
  const killed = killNodeCAt(t, id, 'start');
  const moved = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  await killed;
  t.is(moved.status, 200, JSON.stringify(moved.body));
  t.is(moved.body?.message, `Bot ${id} moved from node node-b to node node-c; node node-c's agent did not say it started it: it starts it once it answers again`);
  t.deepEqual(await engines['node-b'].docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } }), [], 'its old copy is removed');
  await restart('node-c');
  await exactlyOneOn(t, id, 'node-c');
  t.like((await api('node-b', `/api/bots/${id}`)).body, { ok: true, bot: { bot_id: id, node: 'node-c', state: 'running' } });
});

test.serial('a stopped bot moved never runs on its new node, not for a moment', async (t) => {
  const id = fixture.newBotId();
  await createOnB(t, id);
  t.is((await api('node-b', '/api/bots/stop', { body: { bot_id: id, user_id: 'user_7' } })).status, 200);
  let started = 0;
  onNodeCEvents(t, id, 'start', () => (started += 1));
  const moved = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  t.is(moved.status, 200, JSON.stringify(moved.body));
  t.false((await engines['node-c'].docker().getContainer(id).inspect()).State.Running);
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  t.is(started, 0, 'its engine started it');
  t.deepEqual(await runningOn(id), []);
});

test.serial("a copy that runs where the fleet does not place the bot is stopped, said by a `fenced` event; its agent's removal is of that copy alone", async (t) => {
  const id = fixture.newBotId();
  await createOnB(t, id);
  t.is((await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } })).status, 200);
  await exactlyOneOn(t, id, 'node-c');
  const stream = await openStream({ port: agents['node-c'].port }, `/api/bots/${id}/events`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  t.teardown(() => stream.close());
  // A copy started on node-b behind the agents' backs (by hand, an old engine's restart).
  await engines['node-b'].runBot(id, IDLE_BOT, 'user_7');
  const fenced = await stream.next((event) => event.event === 'fenced', 20_000);
  t.like(fenced.data, { node: 'node-b', placed_on: 'node-c' });
  await exactlyOneOn(t, id, 'node-c');
  const removed = await api('node-b', `/api/admin/bots/${id}`, { method: 'DELETE' });
  t.is(removed.status, 200, JSON.stringify(removed.body));
  t.like((await api('node-b', `/api/bots/${id}`)).body, { ok: true, bot: { node: 'node-c', state: 'running' } });
  // Asked of node-c, where it is placed, the removal is the bot's own.
  t.is((await api('node-c', `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  t.deepEqual(await runningOn(id), []);
  t.is((await api('node-b', `/api/bots/${id}`)).status, 404);
});

test.serial("a move runs the very image the bot ran: a new node whose image of that name is another refuses it, and the bot runs on where it was", async (t) => {
  const id = fixture.newBotId();
  // node-c's engine holds another image under the bot's image name.
  const engineC = engines['node-c'].docker();
  const changed = await engineC.createContainer({ Image: TEST_IMAGE, Cmd: ['sh', '-c', 'echo other > /other'] });
  await changed.start();
  await changed.wait();
  await changed.commit({ repo: PINNED_REPO, tag: 'v1' });
  await changed.remove();
  await createOnB(t, id, PINNED);
  const refused = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  t.is(refused.status, 422, JSON.stringify(refused.body));
  t.regex(String(refused.body?.msg), new RegExp(`image ${PINNED} on this node is sha256:[0-9a-f]{64}, not sha256:[0-9a-f]{64}, the image bot ${id} runs: it is not made here; it stays on node node-b`));
  t.deepEqual(await engineC.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } }), []);
  await exactlyOneOn(t, id, 'node-b');
});

/** Each start of the bot adds one to the count in its data folder, then it idles. */
const COUNTER = `n=$(cat /data/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/count; ${IDLE_BOT}`;

async function shOn(name: NodeName, id: string, script: string): Promise<string> {
  return (await fixture.exec({ id, container: engines[name].docker().getContainer(id) }, script)).trim();
}

async function createWithDataOnB(t: ExecutionContext, id: string): Promise<void> {
  await createOnB(t, id, TEST_IMAGE, { data: [{ path: '/data', size_mb: 64 }], command: ['sh', '-c', COUNTER] });
  t.true(await eventually(async () => (await shOn('node-b', id, 'cat /data/count 2>/dev/null').catch(() => '')) === '1', 30_000, 200), 'the bot counted its first start');
  await shOn('node-b', id, 'echo workflows > /data/n8n.sqlite; mkdir -p /data/sub; echo deep > /data/sub/file');
}

const restoreHelpersOn = async (name: NodeName, id: string): Promise<number> => {
  const filters = { label: [`${RESTORE_OF_LABEL}=${id}`] };
  const docker = engines[name].docker();
  return (await docker.listContainers({ all: true, filters })).length + ((await docker.listVolumes({ filters })).Volumes ?? []).length;
};

test.serial('a bot that keeps data moves with it: the same files on its new node, its old volumes gone, a backup of them kept where it was; a drain carries them back', async (t) => {
  const id = fixture.newBotId();
  await createWithDataOnB(t, id);
  const moved = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  t.is(moved.status, 200, JSON.stringify(moved.body));
  await exactlyOneOn(t, id, 'node-c');
  t.is(await shOn('node-c', id, 'cat /data/count'), '2', 'its count carried, and one more start: on node-c');
  t.is(await shOn('node-c', id, 'cat /data/n8n.sqlite /data/sub/file'), 'workflows\ndeep');
  t.deepEqual((await engines['node-b'].docker().listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } })).Volumes ?? [], [], 'its volumes on node-b removed with its old copy');
  t.is(await restoreHelpersOn('node-c', id), 0, 'no scratch volume or helper left on node-c');
  t.like((await api('node-b', `/api/bots/${id}`)).body?.bot, { node: 'node-c', data: [{ path: '/data' }] });
  const volumes = (await engines['node-c'].docker().listVolumes({ filters: { label: [`${BOT_LABEL}=${id}`] } })).Volumes ?? [];
  t.deepEqual(volumes.map((volume) => [volume.Labels[DATA_PATH_LABEL], volume.Labels[DATA_SIZE_LABEL]]), [['/data', '64']], 'its folder made on node-c as its create asked');
  // The backup the move carried is listed on its new node, as any backup of the bot.
  const listed = (await api('node-c', `/api/admin/bots/${id}/backups`)).body?.backups as { id: string }[];
  t.is(listed.length, 1);
  // And in node-b's own folder, the same backup: its data as it left.
  t.deepEqual(await readdir(join(agents['node-b'].env.AGENT_DATA_DIR!, 'backups', id)), [listed[0]!.id]);

  // A drain of node-c back to node-b carries it as a move does.
  const drained = await api('node-b', '/api/admin/nodes/node-c/drain', { body: { to: 'node-b' } });
  t.is(drained.status, 200, JSON.stringify(drained.body));
  t.deepEqual((drained.body?.bots as { bot_id: string; outcome: string }[]).find((bot) => bot.bot_id === id), { bot_id: id, outcome: 'moved' });
  await exactlyOneOn(t, id, 'node-b');
  t.is(await shOn('node-b', id, 'cat /data/count /data/n8n.sqlite /data/sub/file'), '3\nworkflows\ndeep');
});

test.serial("a move whose new node's agent is killed as it swaps the data in: the bot runs on where it was, its data whole; the new node settles what it left once back", async (t) => {
  const id = fixture.newBotId();
  await createWithDataOnB(t, id);
  const killed = killAtEngineEvent(engines['node-c'].docker(), 'start', [`${RESTORE_OF_LABEL}=${id}`, `${RESTORE_STEP_LABEL}=swap`], agents['node-c'].agent.process, Math.floor(Date.now() / 1_000) - 1);
  const moved = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  await killed;
  t.is(moved.status, 503, JSON.stringify(moved.body));
  t.regex(String(moved.body?.msg), new RegExp(`bot ${id} stays on node node-b, its data as it was`));
  await exactlyOneOn(t, id, 'node-b');
  t.is(await shOn('node-b', id, 'cat /data/count /data/n8n.sqlite'), '2\nworkflows', 'its data as it was, and started again once');
  await restart('node-c');
  t.true(await eventually(async () => (await restoreHelpersOn('node-c', id)) === 0, 60_000, 500), 'the restore node-c was killed in: settled once its agent is back');
  t.false((await engines['node-c'].docker().getContainer(id).inspect()).State.Running, 'its copy there, never placed, stays stopped');
  await exactlyOneOn(t, id, 'node-b');
});

test.serial("a move whose driving agent is killed while the bot is stopped for its data: once that agent is back, the bot runs where it was, once, its data whole", async (t) => {
  const id = fixture.newBotId();
  await createWithDataOnB(t, id);
  const killed = killAtEngineEvent(engines['node-b'].docker(), 'die', [`${BOT_LABEL}=${id}`], agents['node-b'].agent.process, Math.floor(Date.now() / 1_000) - 1);
  t.teardown(async () => {
    const { process } = agents['node-b'].agent;
    if (process.exitCode !== null || process.signalCode !== null) await restart('node-b');
  });
  const moved = api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } }).catch(() => undefined);
  await killed;
  t.is(await moved, undefined, 'the agent died before it answered');
  t.false((await engines['node-b'].docker().getContainer(id).inspect()).State.Running, 'killed while the bot was stopped');
  await restart('node-b');
  await exactlyOneOn(t, id, 'node-b');
  t.is(await shOn('node-b', id, 'cat /data/count /data/n8n.sqlite /data/sub/file'), '2\nworkflows\ndeep', 'its data whole, and started again once');
  t.like((await api('node-b', `/api/bots/${id}`)).body?.bot, { node: 'node-b' });
});

test.serial("a moved bot's output is found from either node: the fleet's search merges each node's history by time", async (t) => {
  const id = fixture.newBotId();
  await createOnB(t, id, TEST_IMAGE, { command: ['sh', '-c', `echo "hello from a run"; ${IDLE_BOT}`] });
  type Found = { bot_id: string; node: string; line: string; at: string };
  const search = async (name: NodeName): Promise<Found[]> => {
    const reply = await api(name, `/api/logs/history?${new URLSearchParams({ q: 'hello from a run', user_id: 'user_7' })}`);
    t.is(reply.status, 200, JSON.stringify(reply.body));
    return ((reply.body?.lines ?? []) as Found[]).filter((line) => line.bot_id === id);
  };
  t.true(await eventually(async () => (await search('node-c')).length === 1, 30_000, 500), 'node-c never found the line node-b kept');
  const moved = await api('node-b', `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  t.is(moved.status, 200, JSON.stringify(moved.body));
  let found: Found[] = [];
  t.true(await eventually(async () => (found = await search('node-b')).length === 2, 30_000, 500), JSON.stringify(found));
  t.deepEqual(found.map((line) => line.node), ['node-c', 'node-b'], 'newest first: its run on node-c, then its run on node-b');
  t.deepEqual((await search('node-c')).map((line) => line.node), ['node-c', 'node-b']);
  // A bot's own node alone, when asked.
  const onlyB = await api('node-c', `/api/logs/history?${new URLSearchParams({ q: 'hello from a run', node: 'node-b' })}`);
  t.deepEqual(((onlyB.body?.lines ?? []) as Found[]).filter((line) => line.bot_id === id).map((line) => line.node), ['node-b']);

  // The bot's own search, asked of either node, finds the lines of both runs: each node searches its own and the
  // answers are merged by time; paged one line at a time, each comes once.
  const ownSearch = (name: NodeName, extra: Record<string, string> = {}) => api(name, `/api/bots/${id}/logs/history?${new URLSearchParams({ q: 'hello from a run', ...extra })}`);
  for (const name of ['node-b', 'node-c'] as const) {
    const reply = await ownSearch(name);
    t.is(reply.status, 200, JSON.stringify(reply.body));
    t.is((reply.body?.lines as unknown[]).length, 2, `asked of ${name}: ${JSON.stringify(reply.body)}`);
  }
  const paged: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 4; page++) {
    const reply = await ownSearch('node-c', { limit: '1', order: 'oldest', ...(cursor === undefined ? {} : { cursor }) });
    t.is(reply.status, 200, JSON.stringify(reply.body));
    paged.push(...(reply.body?.lines as Array<{ at: string }>).map((line) => line.at));
    cursor = (reply.body?.next as string | null) ?? undefined;
    if (cursor === undefined) break;
  }
  t.is(paged.length, 2, JSON.stringify(paged));
  t.true(paged[0]! < paged[1]!, 'oldest first: the run on node-b, then the run on node-c');
  t.is(cursor, undefined, 'the last page says there is no more');
  t.is((await ownSearch('node-c', { cursor: 'n.bm90LWpzb24' })).status, 400, 'a cursor no search answered is refused');
});
