import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import test from 'ava';
import Koa from 'koa';
import { pino } from 'pino';
import { createServer as createHttpServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { NodeLocation } from '../../src/fleet/node-beacon.js';
import { envelope } from '../../src/http/envelope.js';
import { jsonBody } from '../../src/http/json-body.js';
import { listen } from '../../src/http/listen.js';
import { AgentMetrics } from '../../src/http/metrics.js';
import { forwardToNode } from '../../src/http/node-forward.js';
import { requestLog } from '../../src/http/request-log.js';
import type { NodeLocator } from '../../src/http/node-forward.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// The edges of passing a call to another node (docs/api.md §17) that two real agents do not reach at will: a node
// whose row cannot be read, one that says no address, one that takes the call and never answers.
const FLEET_KEY = 'fleet-key-0123456789abcdef0123456789abcdef';
const BOT = 'bot_7_7_elsewhere';

/** node-a's forwarding alone, before a route that answers 404 for every bot: what is not passed on reaches it. */
async function nodeA(t: import('ava').ExecutionContext, locator: NodeLocator): Promise<Server> {
  const app = new Koa();
  const metrics = new AgentMetrics();
  app.use(requestLog(pino({ level: 'silent' }), metrics));
  app.use(envelope(metrics));
  app.use(jsonBody());
  app.use(
    forwardToNode({
      node: 'node-a',
      fleetKey: FLEET_KEY,
      driver: new MemoryDriver(),
      store: locator,
      policy: { adminToken: undefined, trustedHosts: [], loopbackPlatform: true, fleetKey: FLEET_KEY },
      deadlineMs: 60_000,
    }),
  );
  app.use((ctx) => {
    ctx.status = 404;
    ctx.body = { ok: false, msg: 'answered here' };
  });
  const server = await listen(app, '127.0.0.1', 0);
  t.teardown(() => server.close());
  return server;
}

const holding = (node: NodeLocation | (() => NodeLocation)): NodeLocator => {
  const now = () => (typeof node === 'function' ? node() : node);
  return { nodeOfBot: async () => now(), nodeNamed: async () => now() };
};

test('while the database does not answer, a call for a bot this node does not hold is a 503 saying so, not a 404', async (t) => {
  const failing = async () => {
    throw new Error('connection terminated');
  };
  const server = await nodeA(t, { nodeOfBot: failing, nodeNamed: failing });
  const reply = await call(server, `/api/bots/${BOT}`);
  t.is(reply.status, 503, reply.text);
  t.regex(String(reply.body?.msg), /database does not answer: which node holds bot bot_7_7_elsewhere cannot be read/);
});

test('a node that says no address: 503 at once naming it; a call passed on already (the Fleet scheme) is never passed again', async (t) => {
  const server = await nodeA(t, holding({ name: 'node-b', url: null, aliveMs: Date.now() }));
  const reply = await call(server, `/api/bots/${BOT}`);
  t.is(reply.status, 503, reply.text);
  t.regex(String(reply.body?.msg), /node node-b says no address the other agents reach it at \(AGENT_NODE_URL\)/);
  const passedOn = await call(server, `/api/bots/${BOT}`, { headers: { authorization: `Fleet ${FLEET_KEY}` } });
  t.is(passedOn.status, 404, passedOn.text);
  t.regex(String(passedOn.body?.msg), /answered here/);
});

test('a node that takes the call and never answers: a 503 once it stops renewing its row, not at the deadline', async (t) => {
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => silent.close());
  const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  // Alive when the call is passed on (renewed 13 s ago), away 2 s later (15 s), and never renewed again.
  const server = await nodeA(t, holding({ name: 'node-b', url, aliveMs: Date.now() - 13_000 }));
  const reply = await call(server, `/api/bots/${BOT}`);
  t.is(reply.status, 503, reply.text);
  t.regex(String(reply.body?.msg), /node node-b does not answer: it stopped saying it is alive/);
});

test("a call passed on carries the fleet's key in place of the caller's credentials, and the call's X-Request-Id: one id in both agents' logs", async (t) => {
  const seen: IncomingHttpHeaders[] = [];
  const nodeB = createHttpServer((request, response) => {
    seen.push(request.headers);
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ ok: true, exits: [] }));
  });
  await new Promise<void>((resolve) => nodeB.listen(0, '127.0.0.1', resolve));
  t.teardown(() => nodeB.close());
  const url = `http://127.0.0.1:${(nodeB.address() as AddressInfo).port}`;
  const server = await nodeA(t, holding({ name: 'node-b', url, aliveMs: Date.now() }));
  const given = await call(server, `/api/bots/${BOT}/exits`, { headers: { 'x-request-id': 'req-fleet-0001', authorization: 'Bearer not-for-node-b' } });
  t.is(given.status, 200, given.text);
  t.is(given.headers['x-request-id'], 'req-fleet-0001');
  t.is(given.headers['x-bot-agent-node'], 'node-b');
  const made = await call(server, `/api/bots/${BOT}/exits`);
  t.is(made.status, 200, made.text);
  t.like(seen, [
    { 'x-request-id': 'req-fleet-0001', authorization: `Fleet ${FLEET_KEY}` },
    { 'x-request-id': made.headers['x-request-id'], authorization: `Fleet ${FLEET_KEY}` },
  ]);
});
