import test from 'ava';
import { pino } from 'pino';
import { CHAT_EVENTS } from '../../src/config.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { TELEGRAM_TAGS } from '../fixtures/chat-schemas.js';
import { chatReceiver, chatSchemaErrors } from '../helpers/chat-receiver.js';
import type { ReceivedChat } from '../helpers/chat-receiver.js';

// The owner told in their chats (docs/api.md §16): real events of a real bot on the real engine, each
// chat's message received on loopback and checked against the schema its service documents.
const fixture = new DockerFixture();
const logLines: string[] = [];
const SECRETS = { discord: 'SECRET-discord-0123', slack: 'SECRET-slack-4567', telegram: '123456:SECRET-telegram-89ab', ntfy: 'tk_SECRET-ntfy-cdef' };
let receiver: Awaited<ReturnType<typeof chatReceiver>>;
let received: ReceivedChat[] = [];
let failing = new Map<string, number>();
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  receiver = await chatReceiver();
  ({ received, failing } = receiver);
  const at = receiver.url;
  agent = await provisioningAgent(fixture, 'address', {
    logger: pino(lineSink(logLines)),
    // Judges this file's bots' health (their `unhealthy` events are told), and restarts none.
    watchdog: { watches: (botId) => botId.endsWith(fixture.runId), acts: false, tickMs: 500 },
    config: {
      chats: {
        discordUrl: `${at}/discord/api/webhooks/123/${SECRETS.discord}`,
        slackUrl: `${at}/slack/services/T0/B0/${SECRETS.slack}`,
        telegram: { api: `${at}/telegram`, token: SECRETS.telegram, chatId: '-1001234567890' },
        ntfy: { url: `${at}/bot-alerts`, token: SECRETS.ntfy },
        events: [...CHAT_EVENTS],
        consoleUrl: 'https://console.example.com',
      },
    },
  });
});

test.after.always(async () => {
  await agent?.close();
  receiver?.close();
  await fixture.cleanup();
});


test('a failed deploy is told in every chat in its own format, within its limits, with the reason, last lines and console link; a chat that failed is retried alone', async (t) => {
  const id = await createdIdleBot(t, fixture, agent.server);
  // Its Discord fails twice first: the delivery is tried again, and only Discord is.
  failing.set('discord', 2);
  // Long lines with characters each format must escape; once (the engine restarts it: a later run only waits, so
  // that the lines the deploy reads are the crashed run's whole).
  const crash = `[ -f /tmp/ran ] && exec sleep 1000; touch /tmp/ran; i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo "line $i" '<b>&amp;</b> \`\`\`' "$(printf 'x%.0s' $(seq 1 300))"; done; sleep 1; exit 3`;
  const deployed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { command: ['sh', '-c', crash], min_ready_s: 5 } });
  t.is(deployed.status, 202, deployed.text);
  const ofBot = () => received.filter((r) => JSON.stringify(r.body).includes(id));
  t.true(await eventually(() => ['discord', 'slack', 'telegram', 'ntfy'].every((chat) => ofBot().filter((r) => r.chat === chat).length === 2), 60_000, 100), JSON.stringify(ofBot().map((r) => r.chat)));
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  t.is(ofBot().length, 8, 'each chat told each event once: a retry of Discord reached no other chat again');
  for (const message of ofBot()) {
    t.is(chatSchemaErrors(message), undefined);
  }
  const [discord] = ofBot().filter((r) => r.chat === 'discord');
  const embed = (discord?.body.embeds as Record<string, unknown>[])[0]!;
  t.regex(String(embed.title), new RegExp(`^Bot ${id} failed its deploy \\(revision 2\\)$`));
  t.regex(String(embed.description), /its run exited with code 3/, JSON.stringify(embed));
  t.is(embed.url, `https://console.example.com/#/bots/${id}`);
  const lines = (embed.fields as { name: string; value: string }[]).find((field) => field.name === 'Last lines')!.value;
  t.regex(lines, /line 30 /, 'the newest lines are kept');
  t.false(lines.slice(3, -3).includes('```'), 'no fence inside the code block');
  t.true(JSON.stringify(embed).length < 6000);

  const [slack] = ofBot().filter((r) => r.chat === 'slack');
  const slackText = JSON.stringify(slack?.body.blocks);
  t.true(slackText.includes(`<https://console.example.com/#/bots/${id}|Bot ${id} failed its deploy (revision 2)>`));
  t.true(slackText.includes('&lt;b&gt;&amp;amp;&lt;/b&gt;'), 'mrkdwn escaped');

  const [telegram] = ofBot().filter((r) => r.chat === 'telegram');
  t.is(telegram?.path, `/telegram/bot${SECRETS.telegram}/sendMessage`);
  t.like(telegram?.body, { chat_id: '-1001234567890', parse_mode: 'HTML' });
  const html = String(telegram?.body.text);
  const tags = [...html.matchAll(/<\/?([a-z-]+)[^>]*>/g)].map((match) => match[1]);
  t.true(tags.every((tag) => TELEGRAM_TAGS.includes(tag ?? '')), `tags: ${tags.join(',')}`);
  const parsedLength = html.replace(/<[^>]+>/g, '').replace(/&(lt|gt|amp|quot);/g, '_').length;
  t.true(parsedLength <= 4096, `${parsedLength} characters after parsing`);
  t.true(html.includes(`<a href="https://console.example.com/#/bots/${id}">Console</a>`));

  const [ntfy] = ofBot().filter((r) => r.chat === 'ntfy');
  t.is(ntfy?.path, '/');
  t.is(ntfy?.headers.authorization, `Bearer ${SECRETS.ntfy}`);
  t.like(ntfy?.body, { topic: 'bot-alerts', priority: 4, click: `https://console.example.com/#/bots/${id}` });
  t.true(Buffer.byteLength(String(ntfy?.body.message)) <= 4096);

  const rolledBack = ofBot().filter((r) => r.chat === 'discord')[1];
  t.regex(String((rolledBack?.body.embeds as Record<string, unknown>[])[0]!.title), new RegExp(`^Bot ${id} was rolled back$`));
  for (const secret of Object.values(SECRETS)) t.false(logLines.some((line) => line.includes(secret)), 'no secret in the log');
});

// Serial (before the others): its one `unhealthy` message per chat is told before the test messages are counted.
test.serial("a bot's own words in a chat message are its words: no masked link, heading, mention or code fence of its in any format", async (t) => {
  // What its health check prints reaches every chat in the `unhealthy` event's reason.
  const hostile = '[Appeal your suspension](https://evil.example/appeal) # Urgent <@123456> @everyone ```js *bold* __u__ ||spoiler|| > quote';
  const check = { exec: ['sh', '-c', `echo '${hostile}'; exit 1`], interval_s: 1, timeout_s: 1, retries: 1, grace_s: 3600 };
  const id = await createdIdleBot(t, fixture, agent.server, { health: check });
  const told = () => received.filter((r) => JSON.stringify(r.body).includes(id) && JSON.stringify(r.body).includes('Appeal'));
  t.true(await eventually(() => ['discord', 'slack', 'telegram', 'ntfy'].every((chat) => told().some((r) => r.chat === chat)), 30_000, 100), JSON.stringify(told().map((r) => r.chat)));
  for (const message of told()) t.is(chatSchemaErrors(message), undefined);

  const embed = (told().find((r) => r.chat === 'discord')?.body.embeds as Record<string, unknown>[])[0]!;
  const description = String(embed.description);
  // Discord drops a backslash before any punctuation and shows that character as text.
  t.true(description.replace(/\\([^0-9A-Za-z\s])/g, '$1').includes(hostile), description);
  const unescaped = (pattern: RegExp) => pattern.test(description.replace(/\\[^0-9A-Za-z\s]/g, ''));
  t.false(unescaped(/\[[^\]]*\]\(/), 'a masked link');
  t.false(unescaped(/https?:\/\//), 'a bare link');
  t.false(unescaped(/#|<@|@everyone|```|\*|__|\|\||>/), 'a heading, mention, fence, emphasis, spoiler or quote');
  t.regex(String((embed.fields as { value: string }[])[0]?.value), /^bot\\_\d+\\_\d+\\_[0-9a-f]+$/, "the bot's id shown as it is, not in italics");

  const slack = JSON.stringify(told().find((r) => r.chat === 'slack')?.body.blocks);
  t.false(slack.includes('<https://evil'), 'a Slack link');
  t.false(slack.includes('<@123456>'), 'a Slack mention');
  const telegram = String(told().find((r) => r.chat === 'telegram')?.body.text);
  t.false(telegram.includes('<a href="https://evil'), 'a Telegram link');
  t.true(telegram.includes('&lt;@123456&gt;'));
});

test("a scheduled run that fails is told in every chat: the schedule, its due time and the failed action's reason", async (t) => {
  const id = await createdIdleBot(t, fixture, agent.server);
  const made = await call(agent.server, `/api/admin/bots/${id}/schedules`, {
    body: { name: 'cache-rotate', cron: '0 0 1 1 *', actions: [{ type: 'command', command: ['sh', '-c', 'echo no cache here >&2; exit 7'] }] },
  });
  t.is(made.status, 201, made.text);
  const { id: scheduleId } = made.body?.schedule as { id: string };
  t.is((await call(agent.server, `/api/admin/bots/${id}/schedules/${scheduleId}/run`, { method: 'POST' })).status, 202);
  const ofBot = () => received.filter((r) => JSON.stringify(r.body).includes(id));
  t.true(await eventually(() => ['discord', 'slack', 'telegram', 'ntfy'].every((chat) => ofBot().some((r) => r.chat === chat)), 30_000, 100), JSON.stringify(ofBot().map((r) => r.chat)));
  for (const message of ofBot()) t.is(chatSchemaErrors(message), undefined);
  const [discord] = ofBot().filter((r) => r.chat === 'discord');
  const embed = (discord?.body.embeds as Record<string, unknown>[])[0]!;
  t.is(embed.title, `Bot ${id} failed a scheduled run`);
  // Discord's markdown escapes taken off: the words as the owner reads them.
  const said = String(embed.description).replaceAll('\\', '');
  t.regex(said, new RegExp(`schedule cache-rotate \\(${scheduleId}\\) due at \\d{4}-`), said);
  t.regex(said, /action 1 \(command\) failed: it exited with code 7/);
  t.false(JSON.stringify(ofBot()).includes('began a scheduled run'), 'a start is not told by default, nor a success');
});

test('a test message on demand reaches every chat; one that fails is named, with no secret in the answer', async (t) => {
  const before = received.length;
  const reply = await call(agent.server, '/api/admin/notifications/test', { method: 'POST' });
  t.is(reply.status, 200, reply.text);
  t.deepEqual((reply.body?.targets as string[]).sort(), ['discord', 'ntfy', 'slack', 'telegram']);
  const tests = received.slice(before);
  t.is(tests.length, 4);
  for (const message of tests) t.is(chatSchemaErrors(message), undefined);
  failing.set('slack', 1);
  const failed = await call(agent.server, '/api/admin/notifications/test', { method: 'POST' });
  t.is(failed.status, 502);
  t.is(failed.body?.msg, 'the test message did not reach every chat: slack answered 500');
  for (const secret of Object.values(SECRETS)) t.false(failed.text.includes(secret));
  const stranger = await call(agent.server, '/api/admin/notifications/test', { method: 'POST', from: '127.0.0.2', headers: { host: 'example.com' } });
  t.is(stranger.status, 403);
});
