/**
 * How long a quick engine call may take, or the engine stay silent while it sends logs, before it
 * counts as unreachable: more than the 2 s the engine may hold an inspection of a container whose exit
 * it is handling (it copies the run's last output first), so that a bot's status read just after it
 * crashed is an answer, not a 503; and more than an engine busy decoding a flooding bot's log stays
 * silent (past 1.5 s in CI's cold runs).
 */
export const ENGINE_DEADLINE_MS = 5_000;
