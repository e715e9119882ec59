/** docs/api.md §8: this many runs that ended without a request ... */
export const CRASHES_FOR_LOOP = 3;
/** ... within this window make a bot crash-looping ... */
export const CRASH_WINDOW_MS = 10 * 60_000;
/** ... until it has run this long without such an end. */
export const RECOVER_AFTER_MS = 10 * 60_000;

/** Whether crashes at these times (ms, any order) put a bot into the crash-looping state at `nowMs`. */
export function isCrashLooping(crashTimesMs: readonly number[], nowMs: number, windowMs = CRASH_WINDOW_MS): boolean {
  return crashTimesMs.filter((at) => at > nowMs - windowMs && at <= nowMs).length >= CRASHES_FOR_LOOP;
}

/**
 * When a crash-looping bot recovers, given its last crash and the start of
 * its current run (undefined when it is not running): once it has run
 * `recoverAfterMs` since both. Undefined while it is not running.
 */
export function recoversAt(lastCrashMs: number | undefined, runStartedMs: number | undefined, recoverAfterMs = RECOVER_AFTER_MS): number | undefined {
  if (runStartedMs === undefined) return undefined;
  return Math.max(lastCrashMs ?? 0, runStartedMs) + recoverAfterMs;
}
