import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { LogHistoryConfig } from '../../src/config.js';
import { shipHistory } from '../../src/log-history/log-shipping.js';
import { LogStore } from '../../src/log-history/log-store.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { freePort } from '../helpers/free-port.js';
import { call } from '../helpers/http-client.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { allPages } from '../helpers/log-pages.js';
import { logsQl, victoriaLogsUrl } from '../helpers/victorialogs.js';

// The log history shipped to a real log database (docs/api.md §21): VictoriaLogs, built from Go modules and run on
// loopback by npm test. Every kept line reaches it with its bot, run, node and stream as labels, by Loki's push
// API; searches answer from it; a database away is a gap kept in the bot's history, not a hang.
const fixture = new DockerFixture();
const RETENTION = { days: 7, botBytes: 100_000_000, totalBytes: 1_000_000_000 };
const dirs: string[] = [];

async function agentWith(t: ExecutionContext, node: string, logHistory: LogHistoryConfig): Promise<ProvisioningAgent> {
  const dataDir = await mkdtemp(join(tmpdir(), 'log-database-'));
  dirs.push(dataDir);
  const agent = await provisioningAgent(fixture, 'address', { config: { dataDir, node, logHistory } });
  t.teardown(() => agent.close());
  return agent;
}

test.before(() => fixture.ready());
test.after.always(async () => {
  await fixture.cleanup();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

interface Line {
  at: string;
  run: string | null;
  stream: string;
  line: string;
}

test('every kept line is shipped with its bot, run, node and stream, and searches answer from the database', async (t) => {
  const agent = await agentWith(t, 'ship-node', { ratePerSecond: 200, retention: RETENTION, databaseUrl: victoriaLogsUrl() });
  const botId = await createdIdleBot(t, fixture, agent.server, {
    command: ['sh', '-c', 'i=0; while [ $i -lt 30 ]; do echo "shipped $i"; i=$((i+1)); done; echo "429 Too Many Requests" >&2; sleep 3600'],
  });
  let rows: Record<string, string>[] = [];
  await eventually(async () => (rows = await logsQl(`{bot=${JSON.stringify(botId)}}`)).length >= 31, 30_000, 500);
  t.is(rows.length, 31, JSON.stringify(rows.map((row) => row._msg)));
  t.deepEqual(new Set(rows.map((row) => row.node)), new Set(['ship-node']));
  t.true(rows.every((row) => row.run !== undefined && !Number.isNaN(Date.parse(row.run))), 'each line names its run');
  t.deepEqual(rows.filter((row) => row.stream === 'stderr').map((row) => row._msg), ['429 Too Many Requests']);
  // The agent's search answers from the database, a page at a time, oldest first.
  const seen: Line[] = [];
  let cursor: string | null = null;
  do {
    const reply = await call(agent.server, `/api/bots/${botId}/logs/history?${new URLSearchParams({ q: 'shipped', order: 'oldest', limit: '7', ...(cursor ? { cursor } : {}) })}`);
    t.is(reply.status, 200, reply.text);
    t.is(reply.body?.from, 'database');
    seen.push(...(reply.body?.lines as Line[]));
    cursor = reply.body?.next as string | null;
  } while (cursor !== null);
  t.deepEqual(seen.map((line) => line.line), Array.from({ length: 30 }, (_, i) => `shipped ${i}`));
  const regex = await call(agent.server, `/api/bots/${botId}/logs/history?${new URLSearchParams({ regex: '^429 Too (Many|Few)', stream: 'stderr' })}`);
  t.deepEqual((regex.body?.lines as Line[]).map((line) => line.line), ['429 Too Many Requests']);
});

test('a database away is a gap kept in the bot\'s history, said while it is away; searches answer from the agent meanwhile', async (t) => {
  // A port nothing listens on: every push is refused at once.
  const away = `http://127.0.0.1:${await freePort()}`;
  const agent = await agentWith(t, 'away-node', { ratePerSecond: 200, retention: RETENTION, databaseUrl: away, shipping: { maxPending: 20, gapMs: 1_000 } });
  const botId = await createdIdleBot(t, fixture, agent.server, {
    command: ['sh', '-c', 'i=0; while [ $i -lt 100 ]; do echo "kept $i"; i=$((i+1)); done; sleep 3600'],
  });
  let gaps: Line[] = [];
  await eventually(async () => {
    const reply = await call(agent.server, `/api/bots/${botId}/logs/history?stream=agent`);
    gaps = (reply.body?.lines ?? []) as Line[];
    return gaps.length > 0;
  }, 30_000, 500);
  t.regex(gaps[0]?.line ?? '', /^\[bot-agent\] \d+ lines written from \S+ to \S+ not shipped to the log database \(AGENT_LOG_DATABASE_URL\)/);
  const kept = await call(agent.server, `/api/bots/${botId}/logs/history?q=kept&limit=1000`);
  t.is(kept.body?.from, 'agent');
  t.is((kept.body?.lines as Line[]).length, 100, 'every line is in the agent\'s own history');
});

test('an agent SIGKILLed while lines wait for the database ships them when it starts again: every kept line there once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'log-database-kill-'));
  dirs.push(dir);
  const botId = `bot_9_9_shipkill${process.pid}`;
  const push = new URL('/insert/loki/api/v1/push', victoriaLogsUrl()).href;
  // The database as the killed agent saw it: taking lines at first, then away (503) until the agent died.
  let open = true;
  let forwarded = 0;
  const proxy = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (chunk: Buffer) => body.push(chunk));
    req.on('end', () => {
      if (!open) return void res.writeHead(503).end();
      forwarded += 1;
      void fetch(push, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(body) }).then(
        async (reply) => res.writeHead(reply.status).end(await reply.text()),
        () => res.writeHead(502).end(),
      );
    });
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  t.teardown(() => proxy.close());
  const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/insert/loki/api/v1/push`;
  const source = (file: string) => JSON.stringify(new URL(`../../src/log-history/${file}.ts`, import.meta.url).pathname);
  // The store and its shipping as the agent wires them (src/agent.ts), in a process of their own: 1,000 lines a
  // second, numbered; the store writes each second and packs a bot's lines past 2,000.
  const writer = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', `
    import { LogStore } from ${source('log-store')};
    import { shipHistory } from ${source('log-shipping')};
    const store = new LogStore(${JSON.stringify(dir)}, () => {});
    shipHistory(store, ${JSON.stringify(proxied)}, 'kill-node', () => {}, { flushMs: 200 });
    store.start();
    let n = 0;
    setInterval(() => {
      for (let i = 0; i < 20; i++, n++) store.append(${JSON.stringify(botId)}, [{ at: Date.now(), run: null, stream: 'stdout', text: 'n' + n }]);
    }, 20);
  `], { stdio: ['ignore', 'inherit', 'inherit'], cwd: process.cwd() });
  // Until the database has taken some of its lines, however long the process takes to start on a busy machine (a
  // fixed 2.5 s was not enough in CI), and a moment more.
  await eventually(() => forwarded > 0, 60_000, 50);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  open = false;
  const shippedBefore = forwarded;
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  writer.kill('SIGKILL');
  await once(writer, 'exit');
  t.true(shippedBefore > 0, 'nothing was shipped before the database went away');

  const store = new LogStore(dir, (what, err) => t.log(what, String(err)));
  t.teardown(() => store.close());
  const kept = (await allPages(store, botId, { order: 'oldest' })).map((line) => line.text);
  t.deepEqual(kept, kept.map((_, i) => `n${i}`), 'the store kept every line once, in order');
  const shipper = shipHistory(store, push, 'kill-node', (what, err) => t.log(what, String(err)), { flushMs: 200 });
  t.teardown(() => shipper.close());
  let rows: Record<string, string>[] = [];
  await eventually(async () => (rows = await logsQl(`{bot=${JSON.stringify(botId)}}`)).length >= kept.length, 30_000, 500);
  const shipped = rows.map((row) => row._msg ?? '');
  t.is(new Set(shipped).size, shipped.length, 'no line shipped twice');
  const missing = kept.filter((text) => !shipped.includes(text));
  t.deepEqual(missing, [], `every kept line is in the database (${shipped.length} there, ${kept.length} kept)`);
  t.is(shipped.length, kept.length);
  t.false(
    (await allPages(store, botId, { stream: 'agent' })).some((line) => line.text.includes('not shipped')),
    'no gap: nothing was left unshipped',
  );
});
