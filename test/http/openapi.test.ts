import test from 'ava';
import { pino } from 'pino';
import { createApp } from '../../src/http/create-app.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { agentFor, TEST_APP_CONFIG } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { openApiMismatch } from '../helpers/openapi-check.js';

test('the document and the router list the same routes', (t) => {
  const { routes } = createApp({
    driver: new MemoryDriver(),
    config: { ...TEST_APP_CONFIG, restartTimeoutMs: 1, rateLimit: 1, rateWindowMs: 1_000 },
    logger: pino({ level: 'silent' }),
  });
  const served = routes.map((route) => route.replace(/:(\w+)/g, '{$1}')).sort();
  const documented = Object.entries(openApiDocument.paths)
    .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
  t.deepEqual(served, documented);
});

test('GET /openapi.json serves the OpenAPI 3.1 document', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const reply = await call(server, '/openapi.json');
  t.is(reply.status, 200);
  t.is(reply.body?.openapi, '3.1.0');
  t.deepEqual(Object.keys(reply.body?.paths as object), Object.keys(openApiDocument.paths));
});

// Every answer the tests see passes through openApiMismatch; these show that it can refuse one.
test('an answer that breaks the document is caught', (t) => {
  const stats = { ok: true, stats: { cpu_percent: 1, memory_usage: '1.00 MB', memory_percent: 1, uptime: '0h 1m' } };
  t.is(openApiMismatch('GET', '/api/bots/bot_1_1_a/stats', 200, stats), undefined);
  t.regex(String(openApiMismatch('GET', '/api/bots/bot_1_1_a/stats', 200, { ok: true, stats: { cpu_percent: 1 } })), /required/);
  t.regex(String(openApiMismatch('GET', '/api/bots/bot_1_1_a/stats', 200, { ...stats, token: 'x' })), /additional/);
  t.regex(String(openApiMismatch('POST', '/api/bots/logs', 504, { ok: false, msg: 'x' })), /not documented/);
  t.regex(String(openApiMismatch('POST', '/api/bots/restart', 200, { ok: true })), /message/);
  t.regex(String(openApiMismatch('GET', '/nowhere', 404, 'Not Found')), /not the envelope/);
  t.is(openApiMismatch('GET', '/nowhere', 404, { ok: false, msg: 'not found' }), undefined);
});
