import test from 'ava';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { agentFor } from '../helpers/agent.js';
import { parseRawReply } from '../helpers/raw-http.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

const BOT = 'bot_1_1_a';

/** A request as bare as a bot's plain HTTP client sends it: no Content-Type at all. */
async function rawCall(server: Server, requestLine: string, body: string) {
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  socket.end(`${requestLine}\r\nHost: localhost\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  let raw = '';
  for await (const chunk of socket) raw += String(chunk);
  return parseRawReply(raw);
}

async function setUp(t: Parameters<typeof agentFor>[0]) {
  const driver = new MemoryDriver();
  driver.add({ id: BOT });
  return { driver, server: await agentFor(t, driver) };
}

const badBodies: Array<[string, string, unknown, RegExp]> = [
  ['restart', 'no body', undefined, /bot_id is required.*user_id is required/],
  ['restart', 'missing user_id', { bot_id: BOT }, /user_id is required/],
  ['restart', 'bot_id a number', { bot_id: 42, user_id: 'u' }, /bot_id must be a string/],
  ['restart', 'user_id a number', { bot_id: BOT, user_id: 7 }, /user_id must be a string/],
  ['restart', 'bad bot id', { bot_id: 'bot_1_x', user_id: 'u' }, /bot_id must look like/],
  ['restart', 'bot id with a path', { bot_id: '../bot_1_1_a', user_id: 'u' }, /bot_id must look like/],
  ['restart', 'bot id too long', { bot_id: `bot_1_1_${'a'.repeat(60)}`, user_id: 'u' }, /bot_id must look like/],
  ['stop', 'missing bot_id', { user_id: 'u' }, /bot_id is required/],
  ['start', 'bot_id null', { bot_id: null, user_id: 'u' }, /bot_id/],
  ['logs', 'missing bot_id', {}, /bot_id is required/],
  ['logs', 'lines zero', { bot_id: BOT, lines: 0 }, /lines must be a whole number from 1 to 10000/],
  ['logs', 'lines too many', { bot_id: BOT, lines: 10_001 }, /lines must be/],
  ['logs', 'lines a string', { bot_id: BOT, lines: '5' }, /lines must be/],
  ['logs', 'lines a fraction', { bot_id: BOT, lines: 2.5 }, /lines must be/],
  ['logs', 'lines negative', { bot_id: BOT, lines: -1 }, /lines must be/],
  ['restart', 'an array body', [BOT], /request body must be a JSON object/],
  ['restart', 'malformed JSON', '{"bot_id": ', /request body must be a JSON object/],
  ['restart', 'a JSON string', '"bot_1_1_a"', /request body must be a JSON object/],
];

for (const [route, what, body, msg] of badBodies) {
  test(`POST /api/bots/${route} with ${what} is a 400 naming the field, before any runtime call`, async (t) => {
    const { driver, server } = await setUp(t);
    const reply = await call(server, `/api/bots/${route}`, { method: 'POST', body });
    t.is(reply.status, 400);
    t.is(reply.body?.ok, false);
    t.regex(String(reply.body?.msg), msg);
    t.deepEqual(driver.calls, []);
  });
}

test('a bad bot id in the stats path is a 400 before any runtime call', async (t) => {
  const { driver, server } = await setUp(t);
  for (const id of ['bot_1', 'BOT_1_1_a', 'bot_1_1_a-b', 'bot_1_1_%C3%A9']) {
    const reply = await call(server, `/api/bots/${id}/stats`);
    t.is(reply.status, 400, id);
    t.regex(String(reply.body?.msg), /bot id in the path must look like/, id);
  }
  t.deepEqual(driver.calls, []);
});

test('a bad X-Bot-ID header is a 400 naming the header', async (t) => {
  const { driver, server } = await setUp(t);
  const reply = await call(server, '/api/bots/self/restart', { method: 'POST', headers: { 'x-bot-id': 'not-a-bot' } });
  t.is(reply.status, 400);
  t.regex(String(reply.body?.msg), /X-Bot-ID must look like/);
  t.deepEqual(driver.lifecycleCalls, []);
});

test('a body over 16 KiB is a 413 envelope', async (t) => {
  const { driver, server } = await setUp(t);
  const reply = await call(server, '/api/bots/restart', {
    body: { bot_id: BOT, user_id: 'user_1', pad: 'x'.repeat(17 * 1024) },
  });
  t.is(reply.status, 413);
  t.like(reply.body, { ok: false });
  t.deepEqual(driver.calls, []);
});

test('a JSON body is read with a JSON type or with none; any other declared type is a 415 before anything runs', async (t) => {
  const { driver, server } = await setUp(t);
  const body = JSON.stringify({ bot_id: BOT, user_id: 'user_1' });
  for (const type of ['application/json', 'application/json; charset=utf-8', 'application/merge-patch+json']) {
    t.is((await call(server, '/api/bots/stop', { body, headers: { 'content-type': type } })).status, 200, type);
  }
  const untyped = await rawCall(server, 'POST /api/bots/start HTTP/1.1', body);
  t.is(untyped.status, 200, 'no Content-Type');
  const calls = driver.lifecycleCalls.length;
  // What a web page may send to any address without a preflight: a form, text, multipart.
  for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'text/plain; charset=utf-8', 'multipart/form-data; boundary=x']) {
    const reply = await call(server, '/api/bots/stop', { body, headers: { 'content-type': type } });
    t.is(reply.status, 415, type);
    t.regex(String(reply.body?.msg), /Content-Type .* is not supported/);
  }
  t.is(driver.lifecycleCalls.length, calls, 'no operation ran');
  // A body-less call may name any type: there is nothing to read.
  t.is((await call(server, '/api/bots/self/restart', { method: 'POST', headers: { 'content-type': 'text/plain', 'x-bot-id': BOT } })).status, 200);
});

test('unknown fields are ignored', async (t) => {
  const { server } = await setUp(t);
  const reply = await call(server, '/api/bots/stop', { body: { bot_id: BOT, user_id: 'user_1', force: true } });
  t.is(reply.status, 200);
});

test('a body that is not JSON and says it is something else is a 415', async (t) => {
  const { driver, server } = await setUp(t);
  const reply = await call(server, '/api/bots/restart', { body: 'bot_id=bot_1_1_a', headers: { 'content-type': 'text/plain' } });
  t.is(reply.status, 415);
  t.like(reply.body, { ok: false });
  t.regex(String(reply.body?.msg), /text\/plain is not supported/);
  t.deepEqual(driver.calls, []);
});

test('keys named after Object.prototype members are ignored, not a crash', async (t) => {
  const { server } = await setUp(t);
  for (const key of ['constructor', 'toString', 'hasOwnProperty', '__defineGetter__']) {
    const reply = await call(server, '/api/bots/logs', { body: `{"bot_id":"${BOT}","${key}":{}}` });
    t.is(reply.status, 200, key);
  }
});

// schemathesis sent one: the parser's default refused such a body as if it were no JSON at all.
test('a __proto__ key, at any depth, is dropped like any unknown field: the call is served and nothing is polluted', async (t) => {
  const { driver, server } = await setUp(t);
  const bodies = [
    `{"__proto__":{"polluted":true},"bot_id":"${BOT}","user_id":"user_1"}`,
    `{"extra":{"__proto__":{"polluted":true}},"bot_id":"${BOT}","user_id":"user_1"}`,
    `{"constructor":{"prototype":{"polluted":true}},"bot_id":"${BOT}","user_id":"user_1"}`,
  ];
  for (const body of bodies) t.is((await call(server, '/api/bots/stop', { body })).status, 200, body);
  t.is(driver.lifecycleCalls.filter((name) => name.startsWith('stop')).length, bodies.length);
  t.is(({} as { polluted?: boolean }).polluted, undefined);
});

test('a logs body that passed is remembered by its bot id and lines alone: any other body is checked again, and a refused one is never kept', async (t) => {
  const { driver, server } = await setUp(t);
  driver.add({ id: 'bot_1_1_b', logLines: ['one', 'two', 'three', 'four'] });
  const logs = (body: unknown) => call(server, '/api/bots/logs', { method: 'POST', body });
  for (let i = 0; i < 2; i++) t.is((await logs({ bot_id: 'bot_1_1_b', lines: 0 })).status, 400, 'refused again');
  for (let i = 0; i < 2; i++) t.like((await logs({ bot_id: 'bot_1_1_b', lines: 3 })).body, { ok: true, logs: 'two\nthree\nfour\n' });
  t.like((await logs({ bot_id: 'bot_1_1_b' })).body, { ok: true, logs: 'one\ntwo\nthree\nfour\n' });
  // Near misses of the remembered body are checked, not taken for it.
  for (const body of [{ bot_id: 'bot_1_1_b', lines: '3' }, { bot_id: 'bot_1_1_b', lines: 3.5 }, { bot_id: 'bot_1_1_b', lines: 30_000 }, { bot_id: 'bot_1_1_b ', lines: 3 }, ['bot_1_1_b', 3]]) {
    t.is((await logs(body)).status, 400, JSON.stringify(body));
  }
  // A window is checked each time: the remembered body of the same bot and lines is not taken for it.
  const windowed = await logs({ bot_id: 'bot_1_1_b', lines: 3, since: 'yesterday' });
  t.is(windowed.status, 400, windowed.text);
  t.is(windowed.body?.msg, 'since must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z');
});

test("a logs read's window: since and until are ISO 8601 times with their zone (400), since before until and neither with follow=true (422)", async (t) => {
  const { driver, server } = await setUp(t);
  driver.add({ id: 'bot_1_1_w', logLines: ['one'] });
  const cases: [string, number, string][] = [
    ['since=2026-12-06', 400, 'since must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z'],
    ['until=2026-12-06T10:00:00', 400, 'until must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z'],
    ['since=2026-12-06T10:00Z', 400, 'since must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z'],
    ['since=2026-13-45T10:00:00Z', 400, 'since must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z'],
    ['until=7102-06-31T20:58:03.7-17:26', 400, 'until must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z'],
    ['until=2026-02-29T10:00:00Z', 400, 'until must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z'],
    // Well-formed times that make no window: no schema states it, so 422.
    ['since=2026-12-06T11:00:00Z&until=2026-12-06T10:00:00Z', 422, 'since must be before until'],
    ['follow=true&since=2026-12-06T10:00:00Z', 422, 'since and until are not taken with follow=true'],
  ];
  for (const [query, status, msg] of cases) {
    const reply = await call(server, `/api/bots/bot_1_1_w/logs?${query}`);
    t.is(reply.status, status, query);
    t.is(reply.body?.msg, msg, query);
  }
  const body = await call(server, '/api/bots/logs', { method: 'POST', body: { bot_id: 'bot_1_1_w', since: '2026-12-06T11:00:00+01:00', until: '2026-12-06T10:00:00Z' } });
  t.is(body.status, 422);
  t.is(body.body?.msg, 'since must be before until');
  const good = await call(server, '/api/bots/bot_1_1_w/logs?since=2026-12-06T10:00:00.5Z&until=2026-12-06T12:00:00%2B01:00');
  t.is(good.status, 200, good.text);
  t.is((await call(server, '/api/bots/bot_1_1_w/logs?since=0004-02-29T00:00:00Z&until=2028-02-29T00:00:00-23:59')).status, 200, 'leap days, in year 4 as in 2028');
});
