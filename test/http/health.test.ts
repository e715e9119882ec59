import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { agentFor } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

test('GET /healthz answers ok', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const reply = await call(server, '/healthz');
  t.is(reply.status, 200);
  t.is(reply.body?.ok, true);
});

test('GET /readyz is ok while the runtime answers and 503 when it does not', async (t) => {
  const driver = new MemoryDriver();
  const server = await agentFor(t, driver);
  t.is((await call(server, '/readyz')).status, 200);
  driver.reachable = false;
  const reply = await call(server, '/readyz');
  t.is(reply.status, 503);
  t.like(reply.body, { ok: false });
  t.regex(String(reply.body?.msg), /runtime unavailable/);
});

test('an unknown path is a 404 envelope saying not found', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  for (const path of ['/', '/api/bots', '/api/bots/bot_1_1_a/logs', '/nope?x=1']) {
    const reply = await call(server, path);
    t.is(reply.status, 404, path);
    t.is(reply.body?.ok, false, path);
    t.regex(String(reply.body?.msg), /not found/, path);
  }
});

test('a wrong method on a known path is a 405 envelope with Allow', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const reply = await call(server, '/api/bots/restart', { method: 'GET' });
  t.is(reply.status, 405);
  t.is(reply.headers.allow, 'POST');
  t.like(reply.body, { ok: false });
  const stats = await call(server, '/api/bots/bot_1_1_a/stats', { method: 'DELETE' });
  t.is(stats.status, 405);
  t.like(stats.body, { ok: false });
});

test('a literal path is served by its own routes only: GET /api/bots/stop is no bot id, and OPTIONS lists only POST', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  for (const path of ['/api/bots/stop', '/api/bots/start', '/api/bots/logs', '/api/bots/restart']) {
    const get = await call(server, path, { method: 'GET' });
    t.is(get.status, 405, path);
    t.is(get.headers.allow, 'POST', path);
    const options = await call(server, path, { method: 'OPTIONS' });
    t.is(options.status, 200, path);
    t.is(options.headers.allow, 'POST', path);
  }
  t.is((await call(server, '/api/bots/bot_1_1_a', { method: 'OPTIONS' })).headers.allow, 'HEAD, GET');
});

test('a method the router does not know at all (TRACE, PROPFIND) is a 405 with Allow, not a 5xx', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  for (const method of ['TRACE', 'PROPFIND', 'PUT', 'PATCH']) {
    for (const [path, allow] of [['/api/bots/restart', /POST/], ['/healthz', /^HEAD, GET$/]] as const) {
      const reply = await call(server, path, { method });
      t.is(reply.status, 405, `${method} ${path}`);
      t.regex(String(reply.headers.allow), allow);
      t.like(reply.body, { ok: false, msg: 'method not allowed' });
    }
  }
});

test('every answer carries X-Request-Id, keeping a usable one the caller sent', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  t.is((await call(server, '/healthz', { headers: { 'x-request-id': 'abc-123' } })).headers['x-request-id'], 'abc-123');
  const made = (await call(server, '/healthz', { headers: { 'x-request-id': 'bad id\twith spaces' } })).headers[
    'x-request-id'
  ];
  // The agent's own: its random prefix and a count, so each is new.
  t.regex(String(made), /^[0-9a-f]{12}-[0-9a-z]+$/);
  const next = (await call(server, '/healthz')).headers['x-request-id'];
  t.regex(String(next), /^[0-9a-f]{12}-[0-9a-z]+$/);
  t.not(next, made);
});

test('a client that half-closes its socket after the request still gets the answer', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const { port } = server.address() as AddressInfo;
  const socket = connect(port, '127.0.0.1');
  socket.end('GET /healthz HTTP/1.0\r\nHost: agent\r\n\r\n');
  let answer = '';
  for await (const chunk of socket) answer += String(chunk);
  t.regex(answer, /^HTTP\/1\.1 200 OK/);
  t.regex(answer, /\{"ok":true/);
});

test('with AGENT_READY_GRACE_MS, /readyz stays ready while the runtime has not answered for less than the grace, then 503; an answer starts it afresh', async (t) => {
  const driver = new MemoryDriver();
  const server = await agentFor(t, driver, { readyGraceMs: 400 });
  t.is((await call(server, '/readyz')).status, 200);
  driver.reachable = false;
  const within = await call(server, '/readyz');
  t.is(within.status, 200);
  t.regex(String(within.body?.message), /not answering/);
  await new Promise((resolve) => setTimeout(resolve, 450));
  t.is((await call(server, '/readyz')).status, 503);
  driver.reachable = true;
  t.is((await call(server, '/readyz')).status, 200);
  driver.reachable = false;
  t.is((await call(server, '/readyz')).status, 200, 'a new grace from the first failure after an answer');
});

test('within the grace, a runtime that does not answer at all is a failure after a second: /readyz answers in time for a probe', async (t) => {
  const driver = new MemoryDriver();
  const server = await agentFor(t, driver, { readyGraceMs: 10_000 });
  t.is((await call(server, '/readyz')).status, 200);
  driver.ping = () => new Promise(() => undefined);
  const reply = await call(server, '/readyz');
  t.is(reply.status, 200);
  t.regex(String(reply.body?.message), /not answering/);
});

test('the grace is for a runtime that answered: an agent whose runtime never answered since it started is not ready, grace or not', async (t) => {
  const driver = new MemoryDriver();
  driver.reachable = false;
  const server = await agentFor(t, driver, { readyGraceMs: 10_000 });
  const reply = await call(server, '/readyz');
  t.is(reply.status, 503);
  t.regex(String(reply.body?.msg), /runtime unavailable/);
  driver.reachable = true;
  t.is((await call(server, '/readyz')).status, 200);
});
