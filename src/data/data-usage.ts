/** One data folder's use, as the runtime measured it (docs/api.md §19). */
export interface DataUse {
  readonly botId: string;
  readonly path: string;
  /** What its create asked for (`size_mb`); undefined: no bound. */
  readonly sizeMb: number | undefined;
  readonly bytes: number;
}

/** How often every data folder is measured: one walk of the engine's volumes for them all, not one per read. */
const MEASURE_EVERY_MS = 5 * 60_000;
/** The first measure, a while after the agent starts (its engine busy with its start). */
const FIRST_MEASURE_MS = 60_000;
const MIB = 1024 * 1024;

/**
 * The bytes each bot's data folders use (docs/api.md §19), measured by the runtime now and then for all bots at
 * once and kept in memory: a status read never measures. A folder past its `size_mb` is told once as it crosses
 * it (`onOver`), and again only after it fell back under.
 */
export class DataUsage {
  private readonly uses = new Map<string, { bytes: number; sizeMb: number | undefined; atMs: number }>();
  private readonly over = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private measuring = false;
  private interval: NodeJS.Timeout | undefined;

  constructor(
    private readonly measure: () => Promise<readonly DataUse[]>,
    private readonly onOver: (use: DataUse) => void,
    private readonly report: (what: string, err: unknown) => void,
    { everyMs = MEASURE_EVERY_MS, firstMs = FIRST_MEASURE_MS }: { everyMs?: number; firstMs?: number } = {},
    private readonly now: () => number = Date.now,
  ) {
    this.timer = setTimeout(() => {
      void this.round();
      this.interval = setInterval(() => void this.round(), everyMs).unref();
    }, firstMs).unref();
  }

  /** The folder's last measure, or undefined before one. */
  of(botId: string, path: string): { bytes: number; sizeMb: number | undefined; at: string } | undefined {
    const use = this.uses.get(key(botId, path));
    return use && { bytes: use.bytes, sizeMb: use.sizeMb, at: new Date(use.atMs).toISOString() };
  }

  /** Every folder's bytes together, and the folders past their size, as last measured. */
  totals(): { bytes: number; overSize: number } {
    let bytes = 0;
    for (const use of this.uses.values()) bytes += use.bytes;
    return { bytes, overSize: this.over.size };
  }

  /** Measures every folder now (one at a time: a round under way is that round). */
  async round(): Promise<void> {
    if (this.measuring) return;
    this.measuring = true;
    try {
      const uses = await this.measure();
      const atMs = this.now();
      this.uses.clear();
      const seen = new Set<string>();
      for (const use of uses) {
        const folder = key(use.botId, use.path);
        seen.add(folder);
        this.uses.set(folder, { bytes: use.bytes, sizeMb: use.sizeMb, atMs });
        const past = use.sizeMb !== undefined && use.bytes > use.sizeMb * MIB;
        if (past && !this.over.has(folder)) {
          this.over.add(folder);
          this.onOver(use);
        } else if (!past) this.over.delete(folder);
      }
      for (const folder of this.over) if (!seen.has(folder)) this.over.delete(folder);
    } catch (err) {
      this.report("the bots' data folders could not be measured", err);
    } finally {
      this.measuring = false;
    }
  }

  close(): void {
    clearTimeout(this.timer);
    clearInterval(this.interval);
  }
}

const key = (botId: string, path: string): string => `${botId}\u0000${path}`;
