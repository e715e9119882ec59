import test from 'ava';
import { ApiError, exitReason, plainWords } from '../../console/api.js';

// What the console says of the agent's refusals and of how runs ended.
test('a refusal in plain words: 429 and 409 say what to do, the agent\'s own text follows', (t) => {
  t.regex(plainWords(new ApiError(429, 'too many operations on bot_1_1_a')), /^Too many operations on this bot just now: wait a minute and try again\. \(too many operations/);
  t.regex(plainWords(new ApiError(409, 'stop in progress: bot bot_1_1_a was still busy')), /^The bot is busy or not in a state for this: stop in progress/);
  t.regex(plainWords(new ApiError(504, 'timeout during restart')), /^It is taking longer than the agent waits; it goes on/);
  t.is(plainWords(new ApiError(404, 'container not found: no bot bot_1_1_a')), 'container not found: no bot bot_1_1_a');
  t.regex(plainWords(new TypeError('Failed to fetch')), /^The agent could not be reached: Failed to fetch/);
});

test('how a run ended, in a few words', (t) => {
  const exit = { at: '', started_at: null, exit_code: 137, signal: 'SIGKILL', oom_killed: true, requested: false, unhealthy: null };
  t.is(exitReason(exit), 'code 137, SIGKILL, out of memory, crashed');
  t.is(exitReason({ ...exit, exit_code: 0, signal: null, oom_killed: false, requested: true }), 'code 0, asked for');
  t.is(exitReason({ ...exit, exit_code: null, signal: null, oom_killed: false }), 'no code, crashed');
  t.is(exitReason({ ...exit, exit_code: 143, signal: 'SIGTERM', oom_killed: false, unhealthy: { check: 'heartbeat', output: null } }), 'code 143, SIGTERM, restarted unhealthy (heartbeat)');
  t.is(exitReason(null), '—');
});
