import test from 'ava';
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import type { Schema } from 'yup';
import { createBotRequest, logsRequest, ownerRequest, validate } from '../../src/http/schemas.js';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { agentFor, TEST_APP_CONFIG } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { openApiMismatch } from '../helpers/openapi-check.js';

test('the document and the router list the same routes', (t) => {
  const { routes } = assembleAgent({
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
  const stats = { ok: true, stats: { cpu_percent: 1, memory_usage: '1.00 MB', memory_percent: 1, uptime: '0h 1m', memory_bytes: 1048576, memory_limit_bytes: 104857600, uptime_s: 60, network_rx_bytes: 10, network_tx_bytes: 20, block_read_bytes: null, block_write_bytes: null } };
  t.is(openApiMismatch('GET', '/api/bots/bot_1_1_a/stats', 200, stats), undefined);
  t.regex(String(openApiMismatch('GET', '/api/bots/bot_1_1_a/stats', 200, { ok: true, stats: { cpu_percent: 1 } })), /required/);
  t.regex(String(openApiMismatch('GET', '/api/bots/bot_1_1_a/stats', 200, { ...stats, token: 'x' })), /additional/);
  t.regex(String(openApiMismatch('POST', '/api/bots/logs', 504, { ok: false, msg: 'x' })), /not documented/);
  t.regex(String(openApiMismatch('POST', '/api/bots/restart', 200, { ok: true })), /message/);
  t.regex(String(openApiMismatch('GET', '/nowhere', 404, 'Not Found')), /not the envelope/);
  t.is(openApiMismatch('GET', '/nowhere', 404, { ok: false, msg: 'not found' }), undefined);
});

// The document's request schemas are derived from the yup schemas; here both judge the same bodies.
const fields: Record<string, unknown[]> = {
  bot_id: ['bot_1_2_abc', 'bot_1_2_', 'bot_x', `bot_1_1_${'a'.repeat(60)}`, ''],
  user_id: ['user_1', '', 'u'.repeat(257)],
  lines: [1, 100, 10_000, 0, 10_001, 1.5, -1, '5'],
  // Docker refuses an upper-case repository (it was a 500); a registry host may have capitals and a port.
  image: [
    'registry.example.com/bot:1',
    'bot',
    'has spaces',
    '-x',
    `a${'b'.repeat(255)}`,
    'jv7N2LoBm.26',
    'Foo/bar',
    'a//b',
    'Registry.Example.com:5000/team/bot:Tag_1',
    `bot@sha256:${'a'.repeat(64)}`,
    'bot:-tag',
  ],
  template: ['telegram', 'n8n', 'Tele', '_x', 'a'.repeat(33)],
  token: ['t', '', 'x'.repeat(4097), 'a\u0000b'],
  domain: ['bot.example.com', 'Bot.Example.COM', 'x', '-bad.com', 'a..b', `${'a'.repeat(64)}.com`],
  port: [1, 8080, 65535, 0, 65536, 80.5],
  env: [{}, { API_KEY: 'x' }, { BOT_TOKEN: 'x' }, { '1BAD': 'x' }, { A: 1 }, { A: 'x'.repeat(4097) }, { A: 'a\u0000b' }, [], null],
  memory_limit: [6 * 1024 * 1024, 1, 1e9, 1.5, 2 ** 50, 2 ** 50 + 1, 4.6107539383909726e24],
  cpu_limit: [0.5, 256, 0, 257, -1],
  command: [['sh'], [], ['sh', 1], [''], ['sh', ''], ['sh', 'a\u0000b'], 'sh', Array.from({ length: 65 }, () => 'x')],
  health: [
    { exec: ['true'], interval_s: 5, grace_s: 30 },
    { heartbeat: { ttl_s: 30 } },
    { exec: ['true'], heartbeat: { ttl_s: 5 }, retries: 3, timeout_s: 2, start_period_s: 0 },
    {},
    { grace_s: 30 },
    { exec: [] },
    { exec: 'true' },
    { heartbeat: { ttl_s: 4 } },
    { heartbeat: {} },
    { heartbeat: null },
    { exec: ['true'], grace_s: 4 },
    { exec: ['true'], interval_s: 0 },
    { exec: ['true'], retries: 1.5 },
    null,
    [],
  ],
  restart_policy: [
    { max_crashes: 5, window_s: 600 },
    {},
    { backoff_s: 60, backoff_max_s: 30 },
    { max_crashes: 0 },
    { max_crashes: 101 },
    { window_s: 9 },
    { backoff_s: 1.5 },
    { backoff_max_s: '300' },
    null,
    [],
  ],
  registry_auth: [
    { username: 'botagent', password: 'secret' },
    { username: 'botagent' },
    { password: 'secret' },
    { username: 1, password: 'secret' },
    { username: 'u', password: 'x'.repeat(4097) },
    { username: 'a\u0000b', password: 'secret' },
    'botagent:secret',
    null,
    [],
  ],
  init: [true, false, 'true', 1, 0, null, []],
  // Folders that hold one another are the one rule of docs/api.md §19 a JSON Schema cannot say: left out here.
  data: [
    [{ path: '/data', size_mb: 64 }],
    [],
    [{ path: '/home/node/.n8n' }, { path: '/var/lib/bot' }],
    [{ path: '/..a' }, { path: '/.b' }, { path: '/...' }, { path: '/procs' }],
    [{ path: 'data' }],
    [{ path: '/' }],
    [{ path: '/proc' }],
    [{ path: '/dev/shm' }],
    [{ path: '/sys/x' }],
    [{ path: '/a/' }],
    [{ path: '/a//b' }],
    [{ path: '/a/./b' }],
    [{ path: '/a/..' }],
    [{ path: '/a:b' }],
    [{ path: '/a,b' }],
    [{ path: '/a\u0001b' }],
    [{ path: `/${'x'.repeat(254)}` }],
    [{ path: `/${'x'.repeat(255)}` }],
    [{ path: '/data', size_mb: 0 }],
    [{ path: '/data', size_mb: 1_048_576 }],
    [{ path: '/data', size_mb: 1_048_577 }],
    [{ path: '/data', size_mb: 1.5 }],
    [{ path: '/data', size_mb: '64' }],
    [{ path: '/data', sizeMb: 64 }],
    [{ path: 5 }],
    [{}],
    [null],
    [{ path: '/a' }, { path: '/b' }, { path: '/c' }, { path: '/d' }],
    [{ path: '/a' }, { path: '/b' }, { path: '/c' }, { path: '/d' }, { path: '/e' }],
    '/data',
    null,
  ],
  node: ['host-2', 'node-1.example', 'a', 'Host-2', '-host', 'h'.repeat(64), '', 2],
};
// The first value of each list is valid: bodies lean to it, so that many are valid and each fault stands alone.
const field = (values: unknown[]) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constant(values[0]) },
    { weight: 3, arbitrary: fc.constantFrom(...values) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  );
const bodyOf = (names: string[]) => {
  const record = Object.fromEntries(names.map((name) => [name, field(fields[name] ?? [])]));
  return fc.oneof(fc.record(record), fc.record(record, { requiredKeys: [] }));
};

for (const [name, schema, component] of [
  ['OwnerRequest', ownerRequest, ['bot_id', 'user_id']],
  ['LogsRequest', logsRequest, ['bot_id', 'lines']],
  ['CreateBotRequest', createBotRequest, Object.keys(createBotRequest.fields)],
] as Array<[string, Schema, string[]]>) {
  test(`/openapi.json and the yup schema judge ${name} bodies alike`, (t) => {
    const ajv = new Ajv2020({ strict: false });
    ajv.addSchema({ ...openApiDocument, $id: 'openapi' });
    const documented = ajv.getSchema(`openapi#/components/schemas/${name}`);
    if (!documented) return t.fail(`no ${name} in the document`);
    const yupAccepts = (body: unknown): boolean => {
      try {
        validate(schema, body);
        return true;
      } catch {
        return false;
      }
    };
    let accepted = 0;
    fc.assert(
      fc.property(bodyOf(component), (body) => {
        const verdict = yupAccepts(body);
        accepted += verdict ? 1 : 0;
        if (Boolean(documented(body)) !== verdict) throw new Error(`yup ${verdict ? 'accepts' : 'refuses'} ${JSON.stringify(body)}; the document does not`);
      }),
      // Enough that the bodies every field's faults leave valid are many (each added field halves them about).
      { numRuns: 12_000 },
    );
    t.log(`${accepted} valid bodies`);
    t.true(accepted > 10, `only ${accepted} bodies were valid: the comparison says little`);
  });
}

test('a query value that yup refuses as empty is one the document refuses too (minLength)', (t) => {
  const parameters = openApiDocument.paths['/api/admin/bots'].get.parameters as ReadonlyArray<{ name: string; schema: { minLength?: number } }>;
  t.is(parameters.find((parameter) => parameter.name === 'user_id')?.schema.minLength, 1);
});
