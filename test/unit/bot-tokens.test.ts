import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { newGeneration } from '../../src/bot-id.js';
import { BadBotToken, BotTokens, KEYS_FILE, ROTATION_GRACE_MS } from '../../src/identity/bot-tokens.js';

test('a token names its bot on every agent holding the same keys, and on no other', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bot-tokens-'));
  const tokens = BotTokens.open(dir);
  const token = tokens.sign('bot_1_2_abc');
  t.regex(token, /^bat1\.bot_1_2_abc\.\d+\.[\w-]{8}\.[\w-]{43}$/);
  t.is(tokens.verify(token).botId, 'bot_1_2_abc');
  t.is(BotTokens.open(dir).verify(token).botId, 'bot_1_2_abc', 'the keys outlive the agent');
  t.is(statSync(join(dir, KEYS_FILE)).mode & 0o777, 0o600);
  t.throws(() => BotTokens.open(mkdtempSync(join(tmpdir(), 'bot-tokens-'))).verify(token), { instanceOf: BadBotToken, message: /no longer holds/ });
});

test('every bot id the contract allows has tokens, capitals included; its id in other case is a forgery', (t) => {
  const tokens = BotTokens.open(':memory:');
  const token = tokens.sign('bot_1_2_AbC');
  t.is(tokens.verify(token).botId, 'bot_1_2_AbC');
  t.throws(() => tokens.verify(token.replace('bot_1_2_AbC', 'bot_1_2_abc')), { message: 'forbidden: the bot token is forged' });
});

test('a token changed in any part is forged; anything else is no token of ours', (t) => {
  const tokens = BotTokens.open(':memory:');
  const token = tokens.sign('bot_1_2_abc');
  const [prefix, , issued, key, signature] = token.split('.') as [string, string, string, string, string];
  t.throws(() => tokens.verify([prefix, 'bot_1_2_abd', issued, key, signature].join('.')), { message: 'forbidden: the bot token is forged' });
  t.throws(() => tokens.verify([prefix, 'bot_1_2_abc', String(Number(issued) + 1), key, signature].join('.')), { message: /forged/ });
  const flipped = `${signature.slice(0, -1)}${signature.endsWith('A') ? 'B' : 'A'}`;
  t.throws(() => tokens.verify([prefix, 'bot_1_2_abc', issued, key, flipped].join('.')), { message: /forged/ });
  for (const other of ['', 'Bearer x', `${token}.x`, token.replace('bat1', 'bat2'), 'bat1.bot_1_2_abc']) {
    t.throws(() => tokens.verify(other), { instanceOf: BadBotToken, message: /not a bot token/ }, other);
  }
});

test('rotation: a new key signs, the old one still verifies for the grace, then no more', (t) => {
  let now = Date.parse('2026-11-26T00:00:00Z');
  const dir = mkdtempSync(join(tmpdir(), 'bot-tokens-'));
  const tokens = BotTokens.open(dir, () => now);
  const old = tokens.sign('bot_1_2_abc');
  tokens.rotate();
  const fresh = tokens.sign('bot_1_2_abc');
  t.not(fresh.split('.')[3], old.split('.')[3], 'the new key signs');
  now += ROTATION_GRACE_MS - 1000;
  t.is(BotTokens.open(dir, () => now).verify(old).botId, 'bot_1_2_abc');
  now += 1000;
  t.throws(() => BotTokens.open(dir, () => now).verify(old), { message: /no longer holds/ });
  t.is(BotTokens.open(dir, () => now).verify(fresh).botId, 'bot_1_2_abc');
});

test('the rotation command adds a signing key in AGENT_DATA_DIR and says until when the old one verifies', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bot-tokens-'));
  const old = BotTokens.open(dir).sign('bot_1_2_abc');
  const run = spawnSync(process.execPath, ['--import=tsx', 'src/identity/rotate-key.ts'], { env: { ...process.env, AGENT_DATA_DIR: dir }, encoding: 'utf8' });
  t.is(run.status, 0, run.stderr);
  t.regex(run.stdout, /tokens of the key before verify until \d{4}-/);
  const rotated = BotTokens.open(dir);
  t.is(rotated.verify(old).botId, 'bot_1_2_abc');
  t.not(rotated.sign('bot_1_2_abc').split('.')[3], old.split('.')[3]);
  t.is((JSON.parse(readFileSync(join(dir, KEYS_FILE), 'utf8')) as { keys: unknown[] }).keys.length, 2);
});

test('a token signed in a second before its bot was removed is refused; one of that second or later is not; an unanswering store refuses none', async (t) => {
  let now = Date.parse('2026-11-26T12:00:00.000Z');
  const tokens = BotTokens.open(':memory:', () => now);
  const earlier = tokens.sign('bot_1_2_abc');
  now += 1_400;
  const sameSecond = tokens.sign('bot_1_2_abc');
  const removed = now + 100;
  tokens.revokeRemovedBots(async (botId) => (botId === 'bot_1_2_abc' ? removed : undefined));
  await t.throwsAsync(tokens.botNamed(earlier), { instanceOf: BadBotToken, message: 'forbidden: the bot token was signed before its bot was removed' });
  t.is(await tokens.botNamed(sameSecond), 'bot_1_2_abc');
  t.is(await tokens.botNamed(tokens.sign('bot_1_3_other')), 'bot_1_3_other', 'another bot was never removed');
  tokens.revokeRemovedBots(() => Promise.reject(new Error('the database does not answer')));
  t.is(await tokens.botNamed(earlier), 'bot_1_2_abc');
});

test('a token verified once is named again from memory while its key verifies; once the key no longer does, it is refused', (t) => {
  let now = Date.parse('2026-11-26T00:00:00Z');
  const tokens = BotTokens.open(':memory:', () => now);
  const old = tokens.sign('bot_1_2_abc');
  t.is(tokens.verify(old).botId, 'bot_1_2_abc');
  t.is(tokens.verify(old).botId, 'bot_1_2_abc', 'the second time, from memory');
  tokens.rotate();
  now += ROTATION_GRACE_MS;
  t.throws(() => tokens.verify(old), { message: /no longer holds/ }, 'a verdict kept in memory outlived its key');
  const fresh = tokens.sign('bot_1_2_abc');
  t.is(tokens.verify(fresh).botId, 'bot_1_2_abc');
  t.throws(() => tokens.verify(`${fresh.slice(0, -2)}xx`), { message: /forged/ }, 'a forged token is never taken for the one verified');
});

test("a bot's token carries the value it was made with: it names the bot that runs now only while that bot carries the same, whatever any database says", async (t) => {
  const tokens = BotTokens.open(':memory:');
  const [made, remade] = [newGeneration(), newGeneration()];
  const runtime = new Map<string, string | null>([['bot_1_2_abc', made]]);
  tokens.bindToRuntime(async (botId) => runtime.get(botId));
  // Removals read from a database that does not answer: the binding alone decides.
  tokens.revokeRemovedBots(() => Promise.reject(new Error('database away')));
  const token = tokens.sign('bot_1_2_abc', made);
  t.regex(token, new RegExp(`^bat2\\.bot_1_2_abc\\.${made}\\.\\d+\\.[\\w-]{8}\\.[\\w-]{43}$`));
  t.is(await tokens.botNamed(token), 'bot_1_2_abc');
  runtime.set('bot_1_2_abc', remade);
  await t.throwsAsync(tokens.botNamed(token), { instanceOf: BadBotToken, message: 'forbidden: the bot token belongs to an earlier bot of this id, since removed' });
  t.is(await tokens.botNamed(tokens.sign('bot_1_2_abc', remade)), 'bot_1_2_abc');
  // A token bound to the id alone never names a bot made with a value; it still names one made without.
  await t.throwsAsync(tokens.botNamed(tokens.sign('bot_1_2_abc')), { message: /earlier bot of this id/ });
  runtime.set('bot_1_2_abc', null);
  t.is(await tokens.botNamed(tokens.sign('bot_1_2_abc')), 'bot_1_2_abc');
  // The value is signed: another put in its place is a forgery.
  t.throws(() => tokens.verify(token.replace(made, remade)), { message: 'forbidden: the bot token is forged' });
  t.throws(() => tokens.sign('bot_1_2_abc', 'short'), { message: /generation/ });
});
