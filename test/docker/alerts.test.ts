import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { chatReceiver } from '../helpers/chat-receiver.js';
import type { ReceivedChat } from '../helpers/chat-receiver.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// Alert rules on the real engine (docs/api.md §22): a line rule and a memory rule each tell the chats once per
// cooldown, the matching lines in the message; a silent bot is told once; bad rules are 400s naming the field.
const fixture = new DockerFixture();
let receiver: Awaited<ReturnType<typeof chatReceiver>>;
let agent: ProvisioningAgent;
let dataDir: string;

test.before(async () => {
  await fixture.ready();
  receiver = await chatReceiver();
  dataDir = await mkdtemp(join(tmpdir(), 'alerts-'));
  agent = await provisioningAgent(fixture, 'address', {
    config: {
      dataDir,
      logHistory: { ratePerSecond: 200, retention: { days: 7, botBytes: 100_000_000, totalBytes: 1_000_000_000 } },
      chats: { ntfy: { url: `${receiver.url}/alerts`, token: undefined }, events: ['alert'] },
    },
  });
});

test.after.always(async () => {
  await agent?.close();
  receiver?.close();
  await fixture.cleanup();
  await rm(dataDir, { recursive: true, force: true });
});

/** The ntfy messages told of the bot so far, with when each came. */
const chatsOf = (botId: string, seen: Map<ReceivedChat, number>): { chat: ReceivedChat; atMs: number }[] =>
  receiver.received.filter((chat) => JSON.stringify(chat.body).includes(botId)).map((chat) => ({ chat, atMs: seen.get(chat) ?? 0 }));

/** Stamps each message with when the test first saw it (every 100 ms), until the test ends. */
function watchArrivals(t: ExecutionContext): Map<ReceivedChat, number> {
  const seen = new Map<ReceivedChat, number>();
  const timer = setInterval(() => {
    for (const chat of receiver.received) if (!seen.has(chat)) seen.set(chat, Date.now());
  }, 100);
  t.teardown(() => clearInterval(timer));
  return seen;
}

async function rule(t: ExecutionContext, body: Record<string, unknown>): Promise<string> {
  const made = await call(agent.server, '/api/admin/alerts', { body });
  t.is(made.status, 201, made.text);
  const id = (made.body?.alert as { id: string }).id;
  t.teardown(() => call(agent.server, `/api/admin/alerts/${id}`, { method: 'DELETE' }).then(() => undefined));
  return id;
}

test('a line rule tells the chats once per cooldown, with the lines that matched', async (t) => {
  const seen = watchArrivals(t);
  const botId = await createdIdleBot(t, fixture, agent.server, {
    command: ['sh', '-c', 'i=0; while :; do echo "GET /api 429 Too Many Requests ($i)" >&2; echo "fine $i"; i=$((i+1)); sleep 0.3; done'],
  });
  await rule(t, { name: 'rate limited', bot_id: botId, kind: 'line', regex: '429 Too (Many|Few)', stream: 'stderr', cooldown_s: 4 });
  t.true(await eventually(() => chatsOf(botId, seen).length >= 2, 30_000, 200), 'two alerts never came');
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const told = chatsOf(botId, seen);
  const text = JSON.stringify(told[0]!.chat.body);
  t.regex(text, /raised an alert/);
  t.regex(text, /alert \\"rate limited\\": a line matches \/429 Too \(Many\|Few\)\//);
  t.regex(text, /GET \/api 429 Too Many Requests \(\d+\)/);
  t.notRegex(text, /fine \d+/, 'only the matching lines');
  for (let i = 1; i < told.length; i++) t.true(told[i]!.atMs - told[i - 1]!.atMs >= 3_500, `alerts ${told[i]!.atMs - told[i - 1]!.atMs} ms apart, within the cooldown`);
});

test('a memory rule tells the chats once within its cooldown, with the use it saw', async (t) => {
  const seen = watchArrivals(t);
  // About 24 MiB held of a 64 MiB limit (docker stats: 37%): above 20% the whole time.
  const botId = await createdIdleBot(t, fixture, agent.server, {
    memory_limit: 64 * 1024 * 1024,
    command: ['sh', '-c', 'x=$(head -c 24000000 /dev/zero | tr "\\0" a); while :; do sleep 1; done'],
  });
  await rule(t, { name: 'memory high', bot_id: botId, kind: 'memory', above_percent: 20, window_s: 5, cooldown_s: 600 });
  t.true(await eventually(() => chatsOf(botId, seen).length >= 1, 40_000, 200), 'the alert never came');
  await new Promise((resolve) => setTimeout(resolve, 12_000));
  const told = chatsOf(botId, seen);
  t.is(told.length, 1, 'once within the cooldown');
  t.regex(JSON.stringify(told[0]!.chat.body), /alert \\"memory high\\": memory at \d+\.\d% for \d+ s \(above 20%\)/);
});

test('a silence rule tells the chats when a running bot writes no line for a while', async (t) => {
  const seen = watchArrivals(t);
  const botId = await createdIdleBot(t, fixture, agent.server, { command: ['sh', '-c', 'echo hello; while :; do sleep 1; done'] });
  await rule(t, { name: 'quiet', bot_id: botId, kind: 'silence', silent_s: 10, cooldown_s: 600 });
  t.true(await eventually(() => chatsOf(botId, seen).length >= 1, 40_000, 200), 'the alert never came');
  t.regex(JSON.stringify(chatsOf(botId, seen)[0]!.chat.body), /alert \\"quiet\\": no line for \d+ s/);
});

test('rules are listed, read and removed; bad rules are 400s naming their field, an unknown bot 404', async (t) => {
  const id = await rule(t, { name: 'any bot crashing loudly', kind: 'line', q: 'panic:' });
  const listed = await call(agent.server, '/api/admin/alerts');
  t.true((listed.body?.alerts as { id: string }[]).some((alert) => alert.id === id));
  t.like((await call(agent.server, `/api/admin/alerts/${id}`)).body, { ok: true, alert: { id, name: 'any bot crashing loudly', bot_id: null, kind: 'line', q: 'panic:', cooldown_s: 300 } });
  for (const [body, message] of [
    [{ kind: 'line', q: 'x' }, /^name is required/],
    [{ name: 'a', kind: 'disk' }, /^kind must be line, cpu, memory or silence/],
    [{ name: 'a', kind: 'line' }, /^a line rule needs q or regex/],
    [{ name: 'a', kind: 'line', regex: '(' }, /^regex is not a valid regular expression/],
    [{ name: 'a', kind: 'memory' }, /^a memory rule needs above_percent/],
    [{ name: 'a', kind: 'memory', above_percent: 150 }, /^above_percent must be at most 100 for a memory rule/],
    [{ name: 'a', kind: 'cpu', above_percent: 50, silent_s: 60 }, /^silent_s is not taken by a cpu rule/],
    [{ name: 'a', kind: 'silence', silent_s: 5 }, /^silent_s must be a whole number of seconds from 10 to 604800/],
    [{ name: 'a', kind: 'silence', silent_s: 60, cooldown_s: -1 }, /^cooldown_s must be a whole number of seconds from 0 to 604800/],
    [{ name: 'a', kind: 'silence', silent_s: 60, severity: 'high' }, /^unknown field "severity": a rule takes name, bot_id, kind/],
  ] as const) {
    const reply = await call(agent.server, '/api/admin/alerts', { body });
    t.is(reply.status, 400, JSON.stringify(body));
    t.regex(String(reply.body?.msg), message);
  }
  t.is((await call(agent.server, '/api/admin/alerts', { body: { name: 'a', bot_id: fixture.newBotId(), kind: 'silence', silent_s: 60 } })).status, 404);
  t.is((await call(agent.server, '/api/admin/alerts/alr_0000000000000000')).status, 404);
  t.is((await call(agent.server, '/api/admin/alerts/nope')).status, 400);
  t.is((await call(agent.server, `/api/admin/alerts/${id}`, { method: 'DELETE' })).status, 200);
  t.is((await call(agent.server, `/api/admin/alerts/${id}`)).status, 404);
});
