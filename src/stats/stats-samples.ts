import { mapLimited } from '../map-limited.js';
import type { BotStats, RuntimeDriver } from '../runtime/driver.js';

/** One reading of a bot, as the console's sparklines and charts draw it. */
export interface StatsSample {
  /** When it was taken, ms since the epoch. */
  readonly at: number;
  readonly cpuPercent: number;
  readonly memoryBytes: number;
}

export interface StatsSamplesOptions {
  /** How often every running bot is read (15 s: metrics-server's own pace, and Docker's cgroups stay held). */
  readonly intervalMs?: number;
  /** How far back the samples reach (15 minutes). */
  readonly keepMs?: number;
  /** How many bots are read at once: a Docker bot's first reading waits a second. */
  readonly concurrency?: number;
  /** The most bots with samples; a bot past it is not sampled until others' samples have aged out. */
  readonly maxBots?: number;
  readonly now?: () => number;
}

/** A bot's last samples, oldest overwritten first: three typed arrays, 20 bytes a sample. */
class SampleRing {
  private readonly at: Float64Array;
  private readonly cpu: Float32Array;
  private readonly memory: Float64Array;
  private next = 0;
  private size = 0;

  constructor(readonly capacity: number) {
    this.at = new Float64Array(capacity);
    this.cpu = new Float32Array(capacity);
    this.memory = new Float64Array(capacity);
  }

  add(sample: StatsSample): void {
    this.at[this.next] = sample.at;
    this.cpu[this.next] = sample.cpuPercent;
    this.memory[this.next] = sample.memoryBytes;
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  /** The samples taken after `since`, oldest first. */
  since(since: number): StatsSample[] {
    const samples: StatsSample[] = [];
    for (let i = 0; i < this.size; i += 1) {
      const slot = (this.next - this.size + i + this.capacity) % this.capacity;
      const at = this.at[slot]!;
      if (at > since) samples.push({ at, cpuPercent: this.cpu[slot]!, memoryBytes: this.memory[slot]! });
    }
    return samples;
  }

  /** When the newest sample was taken; 0 when there is none. */
  newest(): number {
    return this.size === 0 ? 0 : this.at[(this.next - 1 + this.capacity) % this.capacity]!;
  }

  static bytesEach(capacity: number): number {
    return capacity * (8 + 4 + 8);
  }
}

/**
 * The last 15 minutes of every running bot's CPU and memory, read every 15 s
 * and kept in memory (docs/api.md §12): one small ring per bot, dropped once
 * its newest sample is older than what is kept. A round still under way when
 * the next is due makes that one wait; a bot whose reading fails is skipped
 * for the round.
 */
export class StatsSamples {
  readonly intervalMs: number;
  readonly keepMs: number;
  private readonly concurrency: number;
  private readonly maxBots: number;
  private readonly now: () => number;
  private readonly capacity: number;
  private readonly rings = new Map<string, SampleRing>();
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;

  constructor(
    private readonly driver: Pick<RuntimeDriver, 'runningBots' | 'stats' | 'statsRound'>,
    { intervalMs = 15_000, keepMs = 15 * 60_000, concurrency = 100, maxBots = 20_000, now = Date.now }: StatsSamplesOptions = {},
  ) {
    this.intervalMs = intervalMs;
    this.keepMs = keepMs;
    this.concurrency = concurrency;
    this.maxBots = maxBots;
    this.now = now;
    this.capacity = Math.ceil(keepMs / intervalMs) + 1;
  }

  /** Reads every running bot now and then every interval, until close. */
  start(): void {
    if (this.timer) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), this.intervalMs).unref();
  }

  /** One round: every running bot read once. Resolves when it is over; a round already under way is shared. */
  sample(): Promise<void> {
    this.round ??= this.readAll().finally(() => (this.round = undefined));
    return this.round;
  }

  /** The bot's samples of the kept span, oldest first; none for a bot never read. */
  samples(botId: string): StatsSample[] {
    return this.rings.get(botId)?.since(this.now() - this.keepMs) ?? [];
  }

  /** How many bots have samples. */
  get bots(): number {
    return this.rings.size;
  }

  /** The bytes the samples' arrays take. */
  get bytes(): number {
    return this.rings.size * SampleRing.bytesEach(this.capacity);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.round;
  }

  private async readAll(): Promise<void> {
    const cutoff = this.now() - this.keepMs;
    for (const [botId, ring] of this.rings) if (ring.newest() <= cutoff) this.rings.delete(botId);
    const round = await this.driver.statsRound?.().catch(() => undefined);
    if (round) {
      for (const [botId, stats] of round) this.keep(botId, stats);
      return;
    }
    // Not read at once (or that failed): each bot's read asks on its own.
    await mapLimited(this.driver.runningBots(), this.concurrency, (botId) => this.read(botId));
  }

  private async read(botId: string): Promise<void> {
    if (!this.rings.has(botId) && this.rings.size >= this.maxBots) return;
    try {
      this.keep(botId, await this.driver.stats(botId));
    } catch {
      // Stopped since it was listed, or the runtime did not answer: no sample this round.
    }
  }

  private keep(botId: string, stats: BotStats): void {
    let ring = this.rings.get(botId);
    if (!ring) {
      // Checked again once read: other reads of the round may have filled the room meanwhile.
      if (this.rings.size >= this.maxBots) return;
      ring = new SampleRing(this.capacity);
      this.rings.set(botId, ring);
    }
    ring.add({ at: this.now(), cpuPercent: stats.cpuPercent, memoryBytes: stats.memoryBytes });
  }
}
