import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import { listen } from '../../src/http/listen.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import type { RuntimeDriver } from '../../src/runtime/driver.js';

const TOKEN = 'admin-token-that-must-never-be-logged';
const BOT = { id: 'bot_1_1_a', address: '127.0.0.7' };

/** The agent over a memory driver, with every log line it writes kept as parsed JSON. */
async function setUp(t: { teardown(fn: () => void): void }, driver: RuntimeDriver = new MemoryDriver()) {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      raw.push(chunk.toString());
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  if (driver instanceof MemoryDriver) driver.add({ ...BOT, logLines: ['hello'] });
  const { app } = assembleAgent({
    driver,
    config: { ...TEST_APP_CONFIG, adminToken: TOKEN },
    logger: pino(sink),
  });
  const server = await listen(app, '127.0.0.1', 0);
  t.teardown(() => server.close());
  return { server, lines, raw };
}

test('one log line per request, with route, status, duration, caller, bot and request id', async (t) => {
  const { server, lines } = await setUp(t);
  await call(server, `/api/bots/${BOT.id}/stats`, { from: BOT.address, headers: { 'x-request-id': 'req-1' } });
  const line = lines.find((l) => l.requestId === 'req-1');
  t.like(line, {
    msg: 'request',
    method: 'GET',
    route: '/api/bots/:bot_id/stats',
    status: 200,
    caller: `bot:${BOT.id}`,
    botId: BOT.id,
  });
  t.is(typeof line?.ms, 'number');
});

test('a 503 logs its cause once, on the request line: the socket and the errno', async (t) => {
  const driver = createDockerDriver({ dockerHost: 'unix:///nonexistent/docker.sock' });
  t.teardown(() => void driver.close());
  const { server, lines } = await setUp(t, driver);
  const reply = await call(server, `/api/bots/${BOT.id}/stats`, { headers: { 'x-request-id': 'req-503' } });
  t.is(reply.status, 503);
  t.notRegex(reply.text, /ENOENT|nonexistent/, 'the cause stays in the log');
  const mine = lines.filter((l) => l.requestId === 'req-503');
  t.is(mine.length, 1);
  t.like(mine[0], { level: 50, status: 503, error: 'runtime unavailable: cannot reach the docker runtime' });
  t.regex(String(mine[0]?.cause), /ENOENT \/nonexistent\/docker\.sock/);
});

test('a bug in a driver is a 500 "internal error"; its stack goes to the log, never to the caller', async (t) => {
  const driver = new MemoryDriver();
  driver.stats = async () => {
    throw new TypeError("Cannot read properties of undefined (reading 'State')");
  };
  const { server, lines } = await setUp(t, driver);
  const reply = await call(server, `/api/bots/${BOT.id}/stats`, { headers: { 'x-request-id': 'req-bug' } });
  t.like(reply, { status: 500, body: { ok: false, msg: 'internal error' } });
  t.notRegex(reply.text, /State|TypeError|at /);
  const mine = lines.filter((l) => l.requestId === 'req-bug');
  t.is(mine.length, 1);
  t.like(mine[0], { level: 50, status: 500 });
  t.regex(String((mine[0]?.err as { stack?: string } | undefined)?.stack), /TypeError: Cannot read properties[\s\S]*observability\.test/);
});

test('one audit line per lifecycle operation: who, what, which bot, result, duration', async (t) => {
  const { server, lines } = await setUp(t);
  await call(server, '/api/bots/stop', { body: { bot_id: BOT.id, user_id: 'user_1' }, headers: { 'x-request-id': 'req-2' } });
  await call(server, '/api/bots/restart', { body: { bot_id: BOT.id, user_id: 'user_1' } });
  const audits = lines.filter((l) => l.audit === true);
  t.like(audits[0], { requestId: 'req-2', caller: 'platform', operation: 'stop', botId: BOT.id, result: 'ok' });
  t.like(audits[1], { operation: 'restart', botId: BOT.id, result: 'failed 409' });
  t.is(typeof audits[0]?.ms, 'number');
});

test('no token ever appears in a log line', async (t) => {
  const { server, raw } = await setUp(t);
  await call(server, '/api/bots/logs', { body: { bot_id: BOT.id }, headers: { authorization: `Bearer ${TOKEN}` } });
  await call(server, '/api/bots/logs', { body: { bot_id: BOT.id, token: TOKEN }, headers: { authorization: `Bearer x${TOKEN}` } });
  await call(server, '/api/bots/restart', { body: `{"bot_id":"${TOKEN}"`, headers: { authorization: `Bearer ${TOKEN}` } });
  t.true(raw.length >= 3);
  t.false(raw.some((line) => line.includes(TOKEN)));
});

test('/metrics counts requests by route pattern and lifecycle operations, with process metrics', async (t) => {
  const { server } = await setUp(t);
  await call(server, `/api/bots/${BOT.id}/stats`);
  await call(server, '/api/bots/start', { body: { bot_id: BOT.id, user_id: 'user_1' } });
  const reply = await call(server, '/metrics');
  t.is(reply.status, 200);
  t.regex(String(reply.headers['content-type']), /^text\/plain/);
  t.regex(reply.text, /bot_agent_http_requests_total\{method="GET",route="\/api\/bots\/:bot_id\/stats",status="200"\} 1/);
  t.regex(reply.text, /bot_agent_http_request_duration_seconds_bucket\{/);
  t.regex(reply.text, /bot_agent_lifecycle_operations_total\{operation="start",result="ok"\} 1/);
  t.regex(reply.text, /process_resident_memory_bytes/);
  t.notRegex(reply.text, new RegExp(BOT.id));
});

test('/metrics reports a stall of the event loop in its lag figures', async (t) => {
  const { server } = await setUp(t);
  await call(server, '/metrics');
  // The loop is busy for 300 ms: the delay sample due meanwhile comes that much late.
  await new Promise((resolve) => setTimeout(resolve, 150));
  const until = performance.now() + 300;
  while (performance.now() < until);
  await new Promise((resolve) => setTimeout(resolve, 150));
  const max = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec((await call(server, '/metrics')).text)?.[1];
  t.true(Number(max) >= 0.15, `nodejs_eventloop_lag_max_seconds ${max}`);
});

test('/metrics counts runtime errors', async (t) => {
  const { server } = await setUp(t);
  const driver = new MemoryDriver();
  driver.reachable = false;
  const { app } = assembleAgent({
    driver,
    config: TEST_APP_CONFIG,
    logger: pino({ level: 'silent' }),
  });
  const lost = await listen(app, '127.0.0.1', 0);
  t.teardown(() => lost.close());
  await call(lost, '/readyz');
  t.regex((await call(lost, '/metrics')).text, /bot_agent_runtime_errors_total\{kind="unavailable"\} 1/);
  t.is((await call(server, '/metrics')).status, 200);
});
