import type { Beat, SharedBeats } from '../shared/shared-state.js';

/** What a heartbeat without `ttl_s` holds, and its bounds (docs/api.md §13). */
export const DEFAULT_HEARTBEAT_TTL_S = 30;
export { HEARTBEAT_TTL_MAX_S, HEARTBEAT_TTL_MIN_S } from '../runtime/health-policy.js';
/** How often agents sharing a database hand each other the beats they took, in one statement each way. */
export const BEATS_SHARED_EVERY_MS = 2_000;

/**
 * Every bot's latest heartbeat, in memory: a beat is one map entry written, never a database write.
 * Agents sharing a database (docs/api.md §11) write the beats they took since the last round, and read
 * the others', once every BEATS_SHARED_EVERY_MS in one statement each; a beat is then judged late only
 * once that round could have brought it (`margin`).
 */
export class Heartbeats {
  private readonly beats = new Map<string, Beat>();
  /** Beats taken here since the last round, to hand on. */
  private readonly taken = new Map<string, Beat>();
  /** The newest round of the shared beats read so far. */
  private roundRead = 0;
  private timer: NodeJS.Timeout | undefined;
  /** The round under way, if any: a database that answers slowly (or not at all, until its deadline) gets no queue of rounds behind it. */
  private round: Promise<void> | undefined;

  constructor(
    /** The store other agents read, when several share one; none: this agent takes every beat. */
    private readonly shared: SharedBeats | undefined,
    private readonly report: (what: string, err: unknown) => void = () => {},
  ) {}

  /** How late a beat may be known here after it was taken by any agent (ms). */
  get margin(): number {
    return this.shared === undefined ? 0 : 2 * BEATS_SHARED_EVERY_MS;
  }

  beat(botId: string, ttlMs: number | null, atMs = Date.now()): void {
    const beat = { botId, atMs, ttlMs };
    this.beats.set(botId, beat);
    if (this.shared !== undefined) this.taken.set(botId, beat);
  }

  /** The bot's latest beat as far as this agent knows; undefined when it never beat (since this agent started). */
  latest(botId: string): Beat | undefined {
    return this.beats.get(botId);
  }

  /** Forgets the beats of bots the runtime no longer has (removed): the map holds the bots there are, no more. */
  keepOnly(botIds: ReadonlySet<string>): void {
    for (const botId of this.beats.keys()) {
      if (botIds.has(botId)) continue;
      this.beats.delete(botId);
      this.taken.delete(botId);
    }
  }

  get size(): number {
    return this.beats.size;
  }

  /** Begins handing beats to, and taking them from, the other agents. */
  start(): void {
    if (this.shared === undefined || this.timer !== undefined) return;
    this.timer = setInterval(() => {
      this.round ??= this.share().finally(() => (this.round = undefined));
    }, BEATS_SHARED_EVERY_MS).unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.round;
  }

  /** One round: the beats taken here go out, those taken elsewhere come in. A store that is away skips the round. */
  private async share(): Promise<void> {
    const shared = this.shared;
    if (shared === undefined) return;
    const out = [...this.taken.values()];
    this.taken.clear();
    try {
      if (out.length > 0) await shared.shareBeats(out);
      const { beats, round } = await shared.beatsAfter(this.roundRead);
      this.roundRead = round;
      for (const beat of beats) {
        const known = this.beats.get(beat.botId);
        if (!known || known.atMs < beat.atMs) this.beats.set(beat.botId, beat);
      }
    } catch (err) {
      for (const beat of out) if (!this.taken.has(beat.botId)) this.taken.set(beat.botId, beat);
      this.report('the heartbeats could not be shared with the other agents; tried again in a round', err);
    }
  }
}
