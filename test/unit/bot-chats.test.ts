import test from 'ava';
import { DEFAULT_BOT_CHAT_BASE } from '../../src/config.js';
import { Unprocessable } from '../../src/errors.js';
import { botChatConfig, botChatTargets } from '../../src/notify/bot-chats.js';

// Which URLs a bot's own chats may name (docs/api.md §16): an owner's URL, passed on by the platform, must not
// make the agent call anything but the chat services (or what the operator allows).
const base = { ...DEFAULT_BOT_CHAT_BASE, hosts: ['discord.com', 'hooks.slack.com', 'ntfy.example.com:8443', '127.0.0.1:9000'] };

test("the services' own hosts over https, on their scheme's port unless a port is named; plain http on loopback alone", (t) => {
  t.notThrows(() => botChatConfig({ discord_url: 'https://discord.com/api/webhooks/1/x', slack_url: 'https://HOOKS.slack.com/services/a' }, base));
  t.notThrows(() => botChatConfig({ ntfy: { url: 'https://ntfy.example.com:8443/bots' } }, base));
  t.notThrows(() => botChatConfig({ discord_url: 'http://127.0.0.1:9000/hook' }, base));
  for (const [chats, msg] of [
    [{ discord_url: 'https://discord.com.evil.example/api/webhooks/1/x' }, /names host discord\.com\.evil\.example, which is not one of/],
    [{ discord_url: 'https://discord.com:8443/api/webhooks/1/x' }, /names host discord\.com:8443/],
    [{ discord_url: 'http://discord.com/api/webhooks/1/x' }, /discord_url must be an https:\/\/ URL/],
    [{ ntfy: { url: 'https://ntfy.example.com/bots' } }, /ntfy\.url names host ntfy\.example\.com,/],
    [{ slack_url: 'http://169.254.169.254/latest/meta-data' }, /slack_url names host 169\.254\.169\.254/],
    [{ discord_url: 'https://discord.com:99999/api/webhooks/1/x' }, /discord_url cannot be read as a URL/],
    [{ ntfy: { url: 'https://ntfy.example.com:8443/' } }, /ntfy\.url must name a topic/],
  ] as const) {
    const error = t.throws(() => botChatConfig(chats, base), { instanceOf: Unprocessable });
    t.regex(error.message, msg);
    t.false(error.message.includes('/api/webhooks/1/x'), 'the URL\'s secret path is never repeated');
  }
  t.throws(() => botChatConfig({ discord_url: 'https://discord.com/api/webhooks/1/x' }, { ...base, hosts: [] }), { message: /not one of AGENT_NOTIFY_BOT_HOSTS \(none\)/ });
});

test('what the store keeps becomes targets of their own names; what the agent no longer allows is reported, not told', (t) => {
  const kept = JSON.stringify({ discord_url: 'https://discord.com/api/webhooks/1/x', telegram: { token: '1:a', chat_id: '5' }, events: ['exited'] });
  const targets = botChatTargets(kept, base, () => t.fail('nothing to report'));
  t.deepEqual(targets.map((target) => target.name), ['bot-discord', 'bot-telegram']);
  t.true(targets[0]!.wants('exited'));
  t.false(targets[0]!.wants('crash-looping'), "the bot's own events, not the agent's");
  const reports: string[] = [];
  t.deepEqual(botChatTargets(kept, { ...base, hosts: ['hooks.slack.com'] }, (what) => reports.push(what)), []);
  t.is(reports.length, 1);
  t.deepEqual(botChatTargets(undefined, base, () => undefined), []);
});
