import { mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { ChatSeal } from '../../src/secrets/chat-seal.js';

// A bot's own chats as the store keeps them (docs/api.md §16): sealed, opened only by the agents' key and for that bot.
const CHATS = '{"discord_url":"https://discord.com/api/webhooks/1/SECRET","telegram":{"token":"123:SECRET","chat_id":"-100"}}';

test('sealed chats hold none of their text, open for their bot under the same secret, and for no other bot or key', (t) => {
  const seal = new ChatSeal('fleet-key-0123456789abcdef0123456789abcdef');
  const kept = seal.seal('bot_1_1_a', CHATS);
  t.false(kept.includes('SECRET') || kept.includes('discord') || kept.includes('-100'));
  t.not(seal.seal('bot_1_1_a', CHATS), kept, 'each sealing its own nonce');
  t.is(new ChatSeal('fleet-key-0123456789abcdef0123456789abcdef').open('bot_1_1_a', kept), CHATS);
  t.throws(() => seal.open('bot_1_1_b', kept), undefined, 'a row moved to another bot');
  t.throws(() => new ChatSeal('another-key-0123456789abcdef0123456789ab').open('bot_1_1_a', kept), undefined, 'another key');
  t.is(seal.open('bot_1_1_a', CHATS), CHATS, 'a row kept before sealing is read as it is');
});

test("an agent without a fleet key or admin token keeps a key of its own in AGENT_DATA_DIR, its owner's alone, the same at every start", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bot-agent-chat-seal-'));
  const kept = ChatSeal.forAgent(undefined, undefined, dir).seal('bot_1_1_a', CHATS);
  t.is(ChatSeal.forAgent(undefined, undefined, dir).open('bot_1_1_a', kept), CHATS);
  t.deepEqual(readdirSync(dir), ['chat-secrets.key']);
  t.is(statSync(join(dir, 'chat-secrets.key')).mode & 0o777, 0o600);
  t.throws(() => ChatSeal.forAgent('fleet-key-0123456789abcdef0123456789abcdef', undefined, dir).open('bot_1_1_a', kept));
});
