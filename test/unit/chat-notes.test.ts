import test from 'ava';
import { noteOf } from '../../src/notify/chat-messages.js';

// What a chat message says of the restart policy's events (docs/api.md §13, §16): the bot, what happened, and why.
test('a give-up and a crash back-off say how many crashes, and the back-off when the bot runs again', (t) => {
  const givenUp = noteOf({ bot_id: 'bot_1_1_a', type: 'given-up', crashes: 3, window_s: 600, max_crashes: 3 }, undefined);
  t.is(givenUp.title, 'Bot bot_1_1_a was stopped: it crashed past its restart policy');
  t.is(givenUp.detail, '3 crashes in 10 minutes');
  t.is(givenUp.severity, 'bad');
  const backingOff = noteOf({ bot_id: 'bot_1_1_a', type: 'backing-off', crashes: 4, wait_s: 40, until: '2026-11-27T21:00:40.000Z' }, 'https://console.example.com');
  t.is(backingOff.title, 'Bot bot_1_1_a keeps crashing: held stopped for its back-off');
  t.is(backingOff.detail, '4 crashes; started again in 40 s (2026-11-27T21:00:40.000Z)');
  t.is(backingOff.link, 'https://console.example.com/#/bots/bot_1_1_a');
});
