import test from 'ava';
import { ConsoleSessions, SESSION_MS } from '../../src/http/console-session.js';

const TOKEN = 'console-admin-token-0123456789abcdef0123';

test('a session is valid for 12 hours, on every agent that holds the same token, and on no other', (t) => {
  let now = 1_000;
  const sessions = new ConsoleSessions(TOKEN, () => now);
  const value = sessions.issue();
  t.true(sessions.valid(value));
  t.true(new ConsoleSessions(TOKEN, () => now).valid(value), 'another agent with the same token');
  t.false(new ConsoleSessions(`${TOKEN}-rotated`, () => now).valid(value), 'a new token ends every session');
  now += SESSION_MS - 1;
  t.true(sessions.valid(value));
  now += 1;
  t.false(sessions.valid(value));
});

test('a session changed in any part, or ended, is nobody; without a token there are none', async (t) => {
  const sessions = new ConsoleSessions(TOKEN);
  const value = sessions.issue();
  const [expiry, nonce, signature] = value.split('.') as [string, string, string];
  for (const forged of [
    `${Number(expiry) + 1_000_000}.${nonce}.${signature}`,
    `${expiry}.${nonce}x.${signature}`,
    `${expiry}.${nonce}.${signature.slice(0, -1)}`,
    `${value}.more`,
    '',
    'garbage',
  ]) {
    t.false(sessions.valid(forged), forged);
  }
  await sessions.end(value);
  t.false(sessions.valid(value));
  t.true(sessions.valid(sessions.issue()), 'a new session after one ended');
  const none = new ConsoleSessions(undefined);
  t.false(none.available);
  t.false(none.holdsToken(''));
  t.false(none.valid(value));
});

test('only the admin token itself buys a session', (t) => {
  const sessions = new ConsoleSessions(TOKEN);
  t.true(sessions.holdsToken(TOKEN));
  t.false(sessions.holdsToken(TOKEN.slice(0, -1)));
  t.false(sessions.holdsToken(`${TOKEN} `));
});

test('an end kept in the shared store is one every agent with the same token refuses; a session no one ended stays', async (t) => {
  const ends = new Map<string, number>();
  const shared = { end: async (nonce: string, untilMs: number) => void ends.set(nonce, untilMs), ended: async (nonce: string) => ends.has(nonce) };
  const one = new ConsoleSessions(TOKEN, Date.now, shared);
  const other = new ConsoleSessions(TOKEN, Date.now, shared);
  const [kept, ended] = [one.issue(), one.issue()];
  t.true(await other.current(ended));
  await one.end(ended);
  t.false(await other.current(ended));
  t.true(other.valid(ended), 'its signature still holds: only the shared end refuses it');
  t.true(await other.current(kept));
  t.is(ends.get(ended.split('.')[1]!), Number(ended.split('.')[0]), 'kept until it would have expired, by its nonce alone');
});
