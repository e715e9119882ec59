import test from 'ava';
import { pino } from 'pino';
import { DEFAULT_BOT_CHAT_BASE } from '../../src/config.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import pg from 'pg';
import { chatReceiver, chatSchemaErrors } from '../helpers/chat-receiver.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import type { ReceivedChat } from '../helpers/chat-receiver.js';

// A bot's own chats (docs/api.md §16): set by the platform, told the events of that bot alone, beside an agent
// that has no chat of its own; real bots on the real engine, each message received on loopback and checked
// against the schema its service documents. Kept in a real PostgreSQL, sealed: the database holds no URL or token.
const fixture = new DockerFixture();
const logLines: string[] = [];
const SECRETS = { discord: 'SECRET-own-discord-0123', slack: 'SECRET-own-slack-4567', telegram: '654321:SECRET-own-telegram-89ab', ntfy: 'tk_SECRET-own-ntfy-cdef' };
let receiver: Awaited<ReturnType<typeof chatReceiver>>;
let received: ReceivedChat[] = [];
let agent: ProvisioningAgent;
let at = '';
let databaseUrl = '';

test.before(async () => {
  await fixture.ready();
  receiver = await chatReceiver();
  received = receiver.received;
  at = receiver.url;
  databaseUrl = await freshDatabase();
  agent = await provisioningAgent(fixture, 'address', {
    logger: pino(lineSink(logLines)),
    config: {
      databaseUrl,
      chats: undefined,
      botChatBase: { ...DEFAULT_BOT_CHAT_BASE, telegramApi: `${at}/telegram`, consoleUrl: 'https://console.example.com', hosts: [new URL(at).host] },
    },
  });
});

test.after.always(async () => {
  await agent?.close();
  receiver?.close();
  await fixture.cleanup();
  await dropDatabases();
});

const allChats = () => ({
  discord_url: `${at}/discord/api/webhooks/1/${SECRETS.discord}`,
  slack_url: `${at}/slack/services/T0/B0/${SECRETS.slack}`,
  telegram: { token: SECRETS.telegram, chat_id: '-1009876543210' },
  ntfy: { url: `${at}/own-bot`, token: SECRETS.ntfy },
});
const noSecretIn = (text: string) => Object.values(SECRETS).every((secret) => !text.includes(secret));

test("a bot's own chats are told its events alone, in each service's format; answers show which chats, never a URL or token", async (t) => {
  const own = await createdIdleBot(t, fixture, agent.server);
  const other = await createdIdleBot(t, fixture, agent.server);
  const set = await call(agent.server, `/api/admin/bots/${own}/chats`, { method: 'PUT', body: { ...allChats(), events: ['exited', 'started'] } });
  t.is(set.status, 200, set.text);
  t.deepEqual(set.body?.chats, { targets: ['discord', 'slack', 'telegram', 'ntfy'], events: ['exited', 'started'] });
  t.true(noSecretIn(set.text));
  const read = await call(agent.server, `/api/admin/bots/${own}/chats`);
  t.is(read.status, 200, read.text);
  t.deepEqual(read.body?.chats, set.body?.chats);
  t.true(noSecretIn(read.text));
  t.deepEqual((await call(agent.server, `/api/admin/bots/${other}/chats`)).body?.chats, { targets: [], events: [...DEFAULT_BOT_CHAT_BASE.events] });

  for (const id of [other, own]) {
    const restarted = await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } });
    t.is(restarted.status, 200, restarted.text);
  }
  const ofBot = (id: string) => received.filter((message) => JSON.stringify(message.body).includes(id));
  // Its run ended (exited) and a new one began (started): two messages in each of its four chats.
  t.true(await eventually(() => ofBot(own).length === 8, 30_000, 100), JSON.stringify(ofBot(own).map((message) => message.chat)));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  t.is(ofBot(own).length, 8, 'each event told once in each chat');
  t.is(ofBot(other).length, 0, "another bot's events reach none of them");
  // What the database keeps of them is sealed: no URL, token or chat id, and it opens for this bot alone.
  const database = new pg.Client({ connectionString: databaseUrl });
  await database.connect();
  t.teardown(() => database.end());
  const rows = (await database.query('SELECT bot_id, chats FROM bot_chats WHERE bot_id = $1', [own])).rows as { bot_id: string; chats: string }[];
  t.is(rows.length, 1);
  t.true(noSecretIn(rows[0]!.chats) && !rows[0]!.chats.includes('-1009876543210') && !rows[0]!.chats.includes(at), rows[0]!.chats);
  t.regex(rows[0]!.chats, /^sealed1\./);
  for (const message of ofBot(own)) t.is(chatSchemaErrors(message), undefined);
  const telegram = ofBot(own).find((message) => message.chat === 'telegram');
  t.is(telegram?.path, `/telegram/bot${SECRETS.telegram}/sendMessage`);
  t.like(telegram?.body, { chat_id: '-1009876543210' });
  t.like(ofBot(own).find((message) => message.chat === 'ntfy')?.body, { topic: 'own-bot', click: `https://console.example.com/#/bots/${own}` });

  const before = received.length;
  const tested = await call(agent.server, `/api/admin/bots/${own}/chats/test`, { method: 'POST' });
  t.is(tested.status, 200, tested.text);
  t.deepEqual(tested.body?.targets, ['discord', 'slack', 'telegram', 'ntfy']);
  t.is(received.length - before, 4);
  // As each chat draws it: Discord drops the backslash before each character of its markdown.
  t.true(received.slice(before).every((message) => JSON.stringify(message.body).replaceAll('\\\\', '').includes(`bot ${own}`)), 'the test message names the bot');

  const dropped = await call(agent.server, `/api/admin/bots/${own}/chats`, { method: 'PUT', body: {} });
  t.is(dropped.status, 200, dropped.text);
  t.deepEqual((dropped.body?.chats as { targets: string[] }).targets, []);
  const none = await call(agent.server, `/api/admin/bots/${own}/chats/test`, { method: 'POST' });
  t.is(none.status, 409, none.text);
  t.regex(String(none.body?.msg), /has no chat of its own/);
  t.true(logLines.every(noSecretIn), 'no secret in the log');
});

test("a URL on a host AGENT_NOTIFY_BOT_HOSTS does not name is 422 and nothing is kept; malformed chats are 400; an unknown bot's are 404", async (t) => {
  const id = await createdIdleBot(t, fixture, agent.server);
  const put = (body: unknown, bot = id) => call(agent.server, `/api/admin/bots/${bot}/chats`, { method: 'PUT', body });
  for (const [body, msg] of [
    [{ discord_url: `https://discord.com/api/webhooks/1/${SECRETS.discord}` }, /discord_url names host discord\.com, which is not one of AGENT_NOTIFY_BOT_HOSTS/],
    [{ slack_url: 'http://127.0.0.2:81/hook' }, /slack_url names host 127\.0\.0\.2:81/],
    [{ slack_url: `${at.replace(/:\d+$/, ':1')}/hook` }, /slack_url names host 127\.0\.0\.1:1,/],
    [{ ntfy: { url: `${at.replace('127.0.0.1', 'localhost')}/topic` } }, /ntfy\.url names host localhost/],
  ] as const) {
    const refused = await put(body);
    t.is(refused.status, 422, refused.text);
    t.regex(String(refused.body?.msg), msg);
    t.true(noSecretIn(refused.text));
  }
  t.deepEqual((await call(agent.server, `/api/admin/bots/${id}/chats`)).body?.chats, { targets: [], events: [...DEFAULT_BOT_CHAT_BASE.events] });
  const noTopic = await put({ ntfy: { url: `${at}/` } });
  t.is(noTopic.status, 422, noTopic.text);
  t.regex(String(noTopic.body?.msg), /ntfy\.url must name a topic/);
  for (const body of [{ telegram: { token: 'not-a-token', chat_id: '1' } }, { discord_url: 'ftp://x/y' }, { events: 'exited' }, []]) {
    const refused = await put(body);
    t.is(refused.status, 400, `${JSON.stringify(body)}: ${refused.text}`);
  }
  t.is((await put(allChats(), 'bot_1_1_nosuchbot')).status, 404);
  // No body is not `{}`: it drops nothing.
  t.is((await call(agent.server, `/api/admin/bots/${id}/chats`, { method: 'PUT', body: allChats() })).status, 200);
  const bare = await call(agent.server, `/api/admin/bots/${id}/chats`, { method: 'PUT' });
  t.is(bare.status, 400, bare.text);
  t.regex(String(bare.body?.msg), /a body is required/);
  t.is(((await call(agent.server, `/api/admin/bots/${id}/chats`)).body?.chats as { targets: string[] }).targets.length, 4);
});

test("a bot's chats go with it: the bot made again under its id has none", async (t) => {
  const id = await createdIdleBot(t, fixture, agent.server);
  t.is((await call(agent.server, `/api/admin/bots/${id}/chats`, { method: 'PUT', body: allChats() })).status, 200);
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  const again = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'tok', command: ['sleep', '1000'] },
  });
  t.is(again.status, 201, again.text);
  t.deepEqual(((await call(agent.server, `/api/admin/bots/${id}/chats`)).body?.chats as { targets: string[] }).targets, []);
});
