import { once } from 'node:events';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import test from 'ava';
import pg from 'pg';
import { NodeSeal } from '../../src/fleet/node-seal.js';
import { FORWARDED_MAX_BYTES } from '../../src/http/node-forward.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// What an agent of a fleet trusts of the shared PostgreSQL and of a request (docs/api.md §17): a node's row that
// only the database's credentials wrote (no seal of the fleet key, or alive for ever) gets no call and no key;
// a request's absolute target never chooses the host a call is passed to; another node's answer is read to a
// bound and passed back only as JSON or a live stream. One real agent beside the real engine, over a real
// PostgreSQL; the "nodes" it could call are this file's own servers, which count what reaches them.
const fixture = new DockerFixture();
const FLEET_KEY = 'fleet-key-0123456789abcdef0123456789abcdef';
let agent: TestAgent;
let database: pg.Client;

/** A server on loopback standing for a node's agent: every call it takes, with its Authorization, is kept. */
interface CountingNode {
  readonly url: string;
  readonly calls: { path: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

async function countingNode(answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.setHeader('content-type', 'application/json').end('{"ok":true}')): Promise<CountingNode> {
  const calls: CountingNode['calls'] = [];
  const server: Server = createServer((req, res) => {
    calls.push({ path: req.url ?? '', authorization: req.headers.authorization });
    answer(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Writes a node's row and says it holds `botId`, as anyone with the database's credentials can. */
async function putRow(name: string, url: string, aliveMs: number, seal: string | null, botId: string): Promise<void> {
  await database.query('INSERT INTO nodes (name, url, alive_ms, seal) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET url = $2, alive_ms = $3, seal = $4', [name, url, aliveMs, seal]);
  await database.query('INSERT INTO node_bots (bot_id, node, running, seen_ms) VALUES ($1, $2, true, $3) ON CONFLICT (bot_id) DO UPDATE SET node = $2', [botId, name, aliveMs]);
}

/** A row as the fleet's own agent writes it: sealed with the fleet key, alive now. */
const sealedRow = (name: string, url: string, botId: string): Promise<void> => {
  const aliveMs = Date.now();
  return putRow(name, url, aliveMs, new NodeSeal(FLEET_KEY).of({ name, url, aliveMs }), botId);
};

/** One request as bytes, its target written as given, and the status line and body it got. */
async function rawCall(port: number, target: string): Promise<{ status: number; text: string }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.end(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  let raw = '';
  for await (const chunk of socket) raw += String(chunk);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0), text: raw.slice(raw.indexOf('\r\n\r\n') + 4) };
}

test.before(async () => {
  await fixture.ready();
  const databaseUrl = await freshDatabase();
  agent = await startAgent(
    createDockerDriver({ dockerHost: fixture.dockerHost }),
    { databaseUrl, node: 'node-a', nodeUrl: 'http://127.0.0.1:1', fleetKey: FLEET_KEY },
    '127.0.0.1',
    createDockerProvisioner({ dockerHost: fixture.dockerHost, network: 'none', agentUrl: 'http://agent:8000' }),
  );
  database = new pg.Client({ connectionString: databaseUrl });
  await database.connect();
  // Its driver's index is built (until then a bot it does not hold is its own to answer for): its own row lists
  // the bot of its engine this file runs.
  await fixture.runBot();
  const listsOwn = async () => ((await call(agent.server, '/api/admin/nodes')).body?.nodes as { self: boolean; bots: number }[] | undefined)?.some((node) => node.self && node.bots > 0) === true;
  if (!(await eventually(listsOwn, 30_000, 100))) throw new Error('the agent did not list its own bots');
});

test.after.always(async () => {
  await database?.end();
  await agent?.close();
  await fixture.cleanup();
  await dropDatabases();
});

test.serial("a node's row not sealed with the fleet key, or alive at a time to come, gets no call: not for a bot, a create, or the console's table", async (t) => {
  const forged = await countingNode();
  t.teardown(() => forged.close());
  const bot = `bot_${process.pid}_1_forgedrow`;
  for (const [name, aliveMs, seal] of [
    ['node-x', Date.now() + 24 * 3_600_000, null],
    ['node-y', Date.now(), 'bm90LXRoZS1mbGVldC1rZXlzLXNlYWwtYXQtYWxsLW5vLW5vLW5v'],
    ['node-z', Date.now() + 24 * 3_600_000, new NodeSeal(FLEET_KEY).of({ name: 'node-z', url: forged.url, aliveMs: 0 })],
  ] as const) {
    await putRow(name, forged.url, aliveMs, seal, bot);
    const status = await call(agent.server, `/api/bots/${bot}`);
    t.is(status.status, 503, status.text);
    t.regex(String(status.body?.msg), new RegExp(`node ${name} is not taken for one of the fleet's: its row .*: bot ${bot}'s calls wait for it`));
    const created = await call(agent.server, '/api/admin/bots', {
      body: { bot_id: `bot_${process.pid}_2_forgedcreate`, user_id: 'user_1', image: TEST_IMAGE, node: name, registry_auth: { username: 'u', password: 'a-password-not-to-send' } },
    });
    t.is(created.status, 503, created.text);
    t.regex(String(created.body?.msg), new RegExp(`node ${name} is not taken for one of the fleet's`));
  }
  const nodes = (await call(agent.server, '/api/admin/nodes')).body?.nodes as { node: string; alive: boolean; url: string | null; refused?: string }[];
  for (const name of ['node-x', 'node-y', 'node-z']) {
    t.like(nodes.find((node) => node.node === name), { alive: false, url: null }, name);
    t.regex(String(nodes.find((node) => node.node === name)?.refused), /seal|still to come/, name);
  }
  const table = await call(agent.server, '/api/console/fleet');
  t.is(table.status, 200, table.text);
  t.deepEqual(forged.calls, [], 'a refused row was called');
});

test.serial('a request whose target is an absolute URL is refused, and reaches neither its host nor the node; a path is passed on by its path alone', async (t) => {
  const nodeB = await countingNode();
  const elsewhere = await countingNode();
  t.teardown(() => Promise.all([nodeB.close(), elsewhere.close()]));
  const bot = `bot_${process.pid}_3_onnodeb`;
  await sealedRow('node-b', nodeB.url, bot);
  const port = (agent.server.address() as AddressInfo).port;
  for (const target of [`${elsewhere.url}/api/bots/${bot}`, `http://node-b/api/bots/${bot}`, '*']) {
    const reply = await rawCall(port, target);
    t.is(reply.status, 400, `${target}: ${reply.text}`);
    t.regex(reply.text, /the request target must be a path/);
  }
  t.deepEqual(elsewhere.calls, []);
  t.deepEqual(nodeB.calls, []);
  // Passed on as a path (a path that would read as a host is a path there too).
  const passed = await rawCall(port, `/api/bots/${bot}?x=1`);
  t.is(passed.status, 200, passed.text);
  t.deepEqual(nodeB.calls, [{ path: `/api/bots/${bot}?x=1`, authorization: `Fleet ${FLEET_KEY}` }]);
  t.deepEqual(elsewhere.calls, []);
  // A HEAD is passed on too, and its answer (no body) back.
  t.is((await call(agent.server, `/api/bots/${bot}`, { method: 'HEAD' })).status, 200);
  t.is(nodeB.calls.length, 2);
});

test.serial("another node's answer past its bound, or of a content type the agent never answers with, is a 503; every answer says nosniff", async (t) => {
  const bot = `bot_${process.pid}_4_hugeanswer`;
  let written = 0;
  let cut = false;
  const huge = await countingNode((req, res) => {
    if (req.url?.endsWith('/html')) {
      res.setHeader('content-type', 'text/html');
      res.end('<script>alert(1)</script>');
      return;
    }
    // 64 MiB of JSON, a MiB at a time, for as long as the agent reads.
    res.setHeader('content-type', 'application/json');
    const piece = `"${'x'.repeat(1024 * 1024 - 3)}",`;
    res.write('{"ok":true,"logs":[');
    const more = (): void => {
      while (written < 64 * 1024 * 1024) {
        written += piece.length;
        if (!res.write(piece)) return void res.once('drain', more);
      }
      res.end('""]}');
    };
    res.once('close', () => (cut = written < 64 * 1024 * 1024));
    more();
  });
  t.teardown(() => huge.close());
  await sealedRow('node-h', huge.url, bot);
  const reply = await call(agent.server, `/api/bots/${bot}`);
  t.is(reply.status, 503, reply.text);
  t.regex(String(reply.body?.msg), new RegExp(`node node-h did not finish its answer: its answer passed ${FORWARDED_MAX_BYTES} bytes`));
  t.true(await eventually(async () => cut, 5_000, 50), 'the agent read on past its bound');
  t.true(written < 64 * 1024 * 1024, `${written} bytes written`);
  t.is(reply.headers['x-content-type-options'], 'nosniff');

  const html = await call(agent.server, `/api/bots/${bot}/html`);
  t.is(html.status, 503, html.text);
  t.regex(String(html.body?.msg), /node node-h answered 200 with a content type the agent never answers with, not JSON/);
  t.is(html.headers['content-type'], 'application/json; charset=utf-8');
  t.is(html.headers['x-content-type-options'], 'nosniff');
  t.is((await call(agent.server, '/api/admin/nodes')).headers['x-content-type-options'], 'nosniff');
});
