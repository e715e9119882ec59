import { setTimeout as sleep } from 'node:timers/promises';
import { LRUCache } from 'lru-cache';

/**
 * Where the rate limiter's operations let through are counted, shared by several agents: lets one more through
 * under `key` (undefined), or answers how many ms until the next may come.
 */
export type SharedWindow = (key: string, limit: number, windowMs: number, nowMs: number) => Promise<number | undefined>;

/**
 * What agents sharing one store share beside the history (docs/api.md §11): when bots were removed, so that
 * their tokens name nobody since, and which console sessions were ended. Every store implements it, one
 * agent's SQLite too; the rate limiter's window (SharedWindow) is the third part, where a store offers one.
 */
export interface SharedStateStore {
  /** Whether the store's last statement reached it. */
  readonly reachable: boolean;
  /** When the bot was last removed (ms); undefined when never. */
  forgottenAt(botId: string): Promise<number | undefined>;
  /** When each of `botIds` that was ever removed was last removed (ms), in one read. */
  forgottenAtOf(botIds: readonly string[]): Promise<Map<string, number>>;
  /** Keeps a console session's end (by its nonce) until `untilMs`, its expiry; ends past their expiry go. */
  endSession(nonce: string, untilMs: number, nowMs: number): Promise<void>;
  /** Whether a console session (by its nonce) was ended on any agent sharing the store. */
  sessionEnded(nonce: string): Promise<boolean>;
}

/** A bot's latest heartbeat: when (ms) and how long it holds. */
export interface Beat {
  readonly botId: string;
  readonly atMs: number;
  /** What the beat asked for; null: the bot's own (its creator's `heartbeat.ttl_s`), else the default. */
  readonly ttlMs: number | null;
}

/** Where agents sharing a database hand each other their beats (PostgreSQL's `heartbeats` table). */
export interface SharedBeats {
  /** Keeps each bot's beat unless a newer one is kept. */
  shareBeats(beats: readonly Beat[]): Promise<void>;
  /** The beats written after the round `round` (0: all), and the newest round among them. */
  beatsAfter(round: number): Promise<{ beats: Beat[]; round: number }>;
}

/** How long what another agent may have changed (a bot's removal, a session's end), as read, is used. */
const FRESH_MS = 5_000;
/** How long a call waits for such a read. */
const READ_MS = 1_000;
/** The most answers of each kind kept. */
const KEPT = 10_000;

/**
 * The shared state as a caller's check reads it, on every call: kept for FRESH_MS (another agent's change
 * counts here within that), and never waited for past READ_MS: while the store is away or slow, not known.
 */
export class SharedState {
  private readonly removals: LRUCache<string, { value: number | undefined }>;
  /**
   * The removals this agent made, for as long as it runs (the latest KEPT): never forgotten while the store is
   * away or silent, whether or not their write has reached it yet (docs/api.md §4).
   */
  private readonly ownRemovals = new LRUCache<string, number>({ max: KEPT });
  private readonly endedSessions: LRUCache<string, { value: boolean }>;

  constructor(readonly store: SharedStateStore) {
    this.removals = new LRUCache({ max: KEPT, ttl: FRESH_MS, fetchMethod: async (botId) => ({ value: await store.forgottenAt(botId) }) });
    this.endedSessions = new LRUCache({ max: KEPT, ttl: FRESH_MS, fetchMethod: async (nonce) => ({ value: await store.sessionEnded(nonce) }) });
  }

  /**
   * When the bot was last removed (ms since the epoch), if ever: the later of this agent's own removal and the
   * store's; undefined (not known) when this agent removed it never and the store is away or slow.
   */
  async removedAt(botId: string): Promise<number | undefined> {
    const own = this.ownRemovals.get(botId);
    const shared = await this.briefly(this.removals, botId, undefined);
    return own === undefined || (shared !== undefined && shared > own) ? shared : own;
  }

  /** This agent removed the bot: known here at once, before the store has it, and for as long as the agent runs. */
  removed(botId: string, atMs: number): void {
    this.ownRemovals.set(botId, atMs);
    this.removals.set(botId, { value: atMs });
  }

  /** Whether a console session was ended on any agent sharing the store; not ended as far as is known while it is away or slow. */
  sessionEnded(nonce: string): Promise<boolean> {
    return this.briefly(this.endedSessions, nonce, false);
  }

  /** What `cache` holds or the store answers within READ_MS; `unknown` when the store is away or slower. */
  private async briefly<T>(cache: LRUCache<string, { value: T }>, key: string, unknown: T): Promise<T> {
    const known = cache.get(key);
    if (known) return known.value;
    if (!this.store.reachable) return unknown;
    const read = cache.fetch(key).then((kept) => (kept ? kept.value : unknown), () => unknown);
    return Promise.race([read, sleep(READ_MS, unknown, { ref: false })]);
  }
}
