/** What another agent's lock says it is doing. */
export interface HeldElsewhere {
  readonly operation: string;
}

/**
 * Serialises lifecycle operations on one bot across agents. `hold` runs `work`
 * once no other agent operates on the bot; when another is running the same
 * same operation (`joined` given), it waits for that one to end and returns `joined()`
 * instead (a restart asked of two agents at once restarts the bot once).
 */
export interface BotLocks {
  hold<T>(botId: string, operation: string, work: () => Promise<T>, joined?: () => T): Promise<T>;
}

/** One agent: its own queue per bot serialises already. */
export const localLocks: BotLocks = { hold: (_botId, _operation, work) => work() };
