import type { AddressInfo } from 'node:net';
import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import type { TestBot } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';

// Every route × where the bot id is given × who calls, against real containers:
// the bot itself (A), another bot (B), a container without the bot label (C),
// loopback, and C holding the right or a wrong admin token. Each cell's status
// is written out; no refused call changes any container.
const TOKEN = 'matrix-admin-token-of-32-characters';
const fixture = new DockerFixture();
let agent: TestAgent;
let target: { host: string; port: number };
let a: TestBot;
let b: TestBot;
let c: TestBot;

const callers = ['self', 'other bot', 'non-bot', 'loopback', 'admin token', 'wrong token'] as const;
type CallerName = (typeof callers)[number];

interface Cell {
  route: string;
  request: (botId: string) => { method: string; path: string; headers?: Record<string, string>; body?: unknown };
  expected: Record<CallerName, number>;
}

const everyoneRefusedBut = (allowed: number): Record<CallerName, number> => ({
  self: allowed,
  'other bot': 403,
  'non-bot': 403,
  loopback: allowed,
  'admin token': allowed,
  'wrong token': 403,
});

const cells: Cell[] = [
  {
    route: 'self restart, X-Bot-ID',
    request: (id) => ({ method: 'POST', path: '/api/bots/self/restart', headers: { 'X-Bot-ID': id } }),
    expected: everyoneRefusedBut(200),
  },
  {
    route: 'self restart, no header',
    request: () => ({ method: 'POST', path: '/api/bots/self/restart' }),
    // Another bot restarts itself; the platform must name a bot.
    expected: { self: 200, 'other bot': 200, 'non-bot': 403, loopback: 400, 'admin token': 400, 'wrong token': 403 },
  },
  {
    route: 'restart, body',
    request: (id) => ({ method: 'POST', path: '/api/bots/restart', body: { bot_id: id, user_id: 'user_1' } }),
    expected: everyoneRefusedBut(200),
  },
  {
    route: 'stop, body',
    request: (id) => ({ method: 'POST', path: '/api/bots/stop', body: { bot_id: id, user_id: 'user_1' } }),
    expected: everyoneRefusedBut(200),
  },
  {
    route: 'start, body',
    request: (id) => ({ method: 'POST', path: '/api/bots/start', body: { bot_id: id, user_id: 'user_1' } }),
    expected: everyoneRefusedBut(200),
  },
  {
    route: 'logs, body',
    request: (id) => ({ method: 'POST', path: '/api/bots/logs', body: { bot_id: id } }),
    expected: everyoneRefusedBut(200),
  },
  {
    route: 'stats, path',
    request: (id) => ({ method: 'GET', path: `/api/bots/${id}/stats` }),
    expected: everyoneRefusedBut(200),
  },
  {
    // The platform's alone: a bot may not read its own schedules (docs/api.md §18).
    route: 'schedules, path',
    request: (id) => ({ method: 'GET', path: `/api/admin/bots/${id}/schedules` }),
    expected: { ...everyoneRefusedBut(200), self: 403 },
  },
  {
    // Nor change one: refused before the schedule is looked for, which the platform is told is not there.
    route: 'schedule change, path',
    request: (id) => ({ method: 'PATCH', path: `/api/admin/bots/${id}/schedules/sch_0123456789abcdef`, body: { enabled: false } }),
    expected: { ...everyoneRefusedBut(404), self: 403 },
  },
];

async function send(caller: CallerName, request: ReturnType<Cell['request']>): Promise<number> {
  const withToken = (token: string) => ({ ...request, headers: { ...request.headers, Authorization: `Bearer ${token}` } });
  switch (caller) {
    case 'self':
      return (await fixture.httpFromBot(a, target, request)).status;
    case 'other bot':
      return (await fixture.httpFromBot(b, target, withToken(TOKEN))).status;
    case 'non-bot':
      return (await fixture.httpFromBot(c, target, request)).status;
    case 'admin token':
      return (await fixture.httpFromBot(c, target, withToken(TOKEN))).status;
    case 'wrong token':
      return (await fixture.httpFromBot(c, target, withToken(`${TOKEN}x`))).status;
    case 'loopback':
      return (await call(agent.server, request.path, { ...request, signal: AbortSignal.timeout(30_000) })).status;
  }
}

/**
 * Back to both bots running and answering, after a cell that may have restarted
 * or stopped one. A bot acting on itself is answered first; its operation is
 * queued the moment the answer has been written, before the bot can have read
 * it, so draining the lifecycle waits for it.
 */
async function settle(): Promise<void> {
  await agent.lifecycle.drain();
  for (const bot of [a, b]) {
    await eventually(async () => {
      if (!(await fixture.running(bot))) await bot.container.start().catch(() => undefined);
      return (await fixture.exec(bot, 'echo alive').catch(() => '')).includes('alive');
    });
  }
}

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { adminToken: TOKEN, rateLimit: 1000 }, '0.0.0.0');
  target = { host: (await fixture.network()).gateway, port: (agent.server.address() as AddressInfo).port };
  [a, b, c] = await Promise.all([fixture.runBot(), fixture.runBot(), fixture.runBot({ labelled: false })]);
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

test.serial('refused cells: the status written for each, and no container changes', async (t) => {
  const before = await Promise.all([a, b, c].map((bot) => fixture.startedAt(bot)));
  for (const cell of cells) {
    for (const caller of callers) {
      const expected = cell.expected[caller];
      if (expected === 200) continue;
      t.is(await send(caller, cell.request(a.id)), expected, `${cell.route} by ${caller}`);
    }
  }
  t.deepEqual(await Promise.all([a, b, c].map((bot) => fixture.startedAt(bot))), before);
  t.true((await Promise.all([a, b, c].map((bot) => fixture.running(bot)))).every(Boolean));
});

test.serial('allowed cells: the status written for each', async (t) => {
  for (const cell of cells) {
    for (const caller of callers) {
      if (cell.expected[caller] !== 200) continue;
      await settle();
      t.is(await send(caller, cell.request(a.id)), 200, `${cell.route} by ${caller}`);
    }
  }
  await settle();
});

test.serial('identity comes from the connection only: forwarding headers are never trusted', async (t) => {
  const bAddress = Object.values((await b.container.inspect()).NetworkSettings.Networks)[0]?.IPAddress ?? '';
  const spoofs = { 'X-Forwarded-For': '127.0.0.1', 'X-Real-IP': '127.0.0.1', Forwarded: 'for=127.0.0.1' };
  const fromStranger = await fixture.httpFromBot(c, target, { method: 'POST', path: '/api/bots/logs', headers: spoofs, body: { bot_id: a.id } });
  t.is(fromStranger.status, 403, 'a stranger posing as loopback');
  const asOtherBot = await call(agent.server, '/api/bots/logs', { body: { bot_id: a.id }, headers: { 'X-Forwarded-For': bAddress } });
  t.is(asOtherBot.status, 200, 'loopback posing as another bot is still the platform');
  const fromBot = await fixture.httpFromBot(b, target, {
    method: 'POST',
    path: '/api/bots/logs',
    headers: { 'X-Forwarded-For': Object.values((await a.container.inspect()).NetworkSettings.Networks)[0]?.IPAddress ?? '' },
    body: { bot_id: a.id },
  });
  t.is(fromBot.status, 403, 'a bot posing as another bot');
});

test.serial('a web page on the host acts on nothing and reads nothing: simple POSTs, DNS rebinding, foreign Origins', async (t) => {
  const before = await fixture.startedAt(a);
  const owner = { bot_id: a.id, user_id: 'user_1' };
  // What the issue measured: a page's simple request stopped the bot; a form started it again.
  const page = { Origin: 'http://evil.example', 'Sec-Fetch-Site': 'cross-site' };
  const simple = await call(agent.server, '/api/bots/stop', { body: JSON.stringify(owner), headers: { ...page, 'content-type': 'text/plain' } });
  t.is(simple.status, 415);
  const form = await call(agent.server, '/api/bots/stop', {
    body: JSON.stringify(owner),
    headers: { ...page, 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.is(form.status, 415);
  const { port } = agent.server.address() as AddressInfo;
  const attempts: Array<[string, Record<string, string>]> = [
    ['a rebinding page (its own name in Host)', { Host: `evil.example:${port}` }],
    ['a foreign Origin', { Origin: 'http://evil.example' }],
    ['an opaque Origin', { Origin: 'null' }],
    ['a cross-site fetch', { 'Sec-Fetch-Site': 'cross-site' }],
    ['a same-site fetch', { 'Sec-Fetch-Site': 'same-site' }],
  ];
  for (const [what, headers] of attempts) {
    for (const request of [
      { path: '/api/bots/stop', body: owner },
      { path: '/api/bots/restart', body: owner },
      { path: '/api/bots/logs', body: { bot_id: a.id } },
      { path: `/api/bots/${a.id}/stats` },
      { path: `/api/bots/${a.id}` },
      { path: `/api/bots/${a.id}/exits` },
      { path: '/api/admin/bots' },
    ]) {
      const reply = await call(agent.server, request.path, { ...request, headers });
      t.is(reply.status, 403, `${what}: ${request.path}`);
      t.regex(String(reply.body?.msg), /^forbidden: cross-site request/);
      t.false(/bot_\d/.test(JSON.stringify(reply.body).replace(a.id, '')), 'no bot data');
    }
  }
  t.is(await fixture.startedAt(a), before, 'the bot was never stopped or restarted');
  t.true(await fixture.running(a));
  // The platform on the host is still the platform.
  t.is((await call(agent.server, '/api/bots/logs', { body: { bot_id: a.id }, headers: { Origin: `http://localhost:${port}` } })).status, 200);
});
