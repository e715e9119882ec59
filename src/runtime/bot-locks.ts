/** What another agent's lock says it is doing. */
export interface HeldElsewhere {
  readonly operation: string;
}

/** The operation of an agent that died holding the lock, which `work` now finishes. */
export interface Inherited {
  readonly operation: string;
  /** When the dead holder began it. */
  readonly begun: Date;
}

/**
 * Serialises lifecycle operations on one bot across agents. `hold` runs `work`
 * once no other agent operates on the bot; when another is running the same
 * operation (`joined` given), it waits for that one to end and returns `joined()`
 * instead (a restart asked of two agents at once restarts the bot once). When
 * the lock is taken over from an agent that died holding it, `work` is told what
 * that agent was doing, so that it can finish it rather than do it again. An
 * agent that can no longer hold the lock stops waiting for `work` with a 503.
 */
export interface BotLocks {
  hold<T>(botId: string, operation: string, work: (inherited?: Inherited) => Promise<T>, options?: HoldOptions<T>): Promise<T>;
}

export interface HoldOptions<T> {
  /** The same operation under way elsewhere: its end is this one's answer. */
  readonly joined?: () => T;
  /** The longest to wait for another agent's operation; past it, OperationInProgress (409). */
  readonly waitMs?: number;
}

/** One agent: its own queue per bot serialises already. */
export const localLocks: BotLocks = { hold: (_botId, _operation, work) => work() };
