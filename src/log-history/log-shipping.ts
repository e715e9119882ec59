import type { LogStore, NewLine, StoredLine } from './log-store.js';

/** A kept line on its way to the log database, with the bot it is of. */
export interface ShippedLine extends StoredLine {
  readonly botId: string;
}

/** What the shipper did not ship of one bot while the database was away, which the bot's history then says. */
export interface ShippingGap {
  readonly botId: string;
  readonly lines: number;
  readonly fromAt: number;
  readonly toAt: number;
}

export interface ShipperOptions {
  /** Lines a push carries at most. */
  readonly batchLines?: number;
  /** How often what waits is pushed. */
  readonly flushMs?: number;
  /** Lines waiting past this are not kept for the database, and said as a gap: memory stays bounded. */
  readonly maxPending?: number;
  /** A push's deadline. */
  readonly timeoutMs?: number;
  /** How long the database may stay away before the gaps so far are said (they are said at once when it is back). */
  readonly gapMs?: number;
}

/** Where the shipper says what it did: the gaps, kept in the bots' history, and how far every line was shipped. */
export interface ShippingMarks {
  gap(gap: ShippingGap): void;
  /** Every line up to `seq` (the history's order of keeping) was pushed, or said as a gap. */
  shipped(seq: number): void;
}

/** The line a gap in the shipping is kept as, in the bot's history (and so, once it is back, in the database). */
export const shippingGapLine = (gap: ShippingGap): NewLine => ({
  at: gap.toAt,
  run: null,
  stream: 'agent',
  text: `[bot-agent] ${gap.lines} lines written from ${new Date(gap.fromAt).toISOString()} to ${new Date(gap.toAt).toISOString()} not shipped to the log database (AGENT_LOG_DATABASE_URL): it did not take them in time; the agent's own history has them`,
});

const RETRY_FIRST_MS = 1_000;
const DEFAULT_MAX_PENDING = 50_000;
const RETRY_MAX_MS = 30_000;

/**
 * A line's time in nanoseconds as the database keeps it: its millisecond, and its place in the agent's history
 * below that, so that the database orders a bot's lines as the history does and a page's cursor names one line.
 */
export const shippedNanos = (line: Pick<StoredLine, 'at' | 'seq'>): bigint => BigInt(line.at) * 1_000_000n + BigInt(line.seq % 1_000_000);

/**
 * Ships every kept line to a log database with Loki's push API (docs/api.md §21), its bot, run, node and stream
 * as labels: in batches, retried with a back-off while the database is away, bounded in memory. Lines past the
 * bound are not held: each bot's are counted and handed to `marks.gap`, which keeps the gap in the bot's history.
 */
export class LokiShipper {
  private pending: ShippedLine[] = [];
  private readonly gaps = new Map<string, ShippingGap>();
  private timer: NodeJS.Timeout | undefined;
  private pushing: Promise<void> | undefined;
  private retryAtMs = 0;
  private retryMs = RETRY_FIRST_MS;
  /** When the oldest gap not yet said began (ms), or undefined. */
  private gapSinceMs: number | undefined;
  private closed = false;
  /** Lines pushed, and lines not kept for the database, since start (for /metrics and tests). */
  shipped = 0;
  notShipped = 0;
  private readonly batchLines: number;
  private readonly maxPending: number;
  private readonly timeoutMs: number;
  private readonly flushMs: number;
  private readonly gapMs: number;

  constructor(
    private readonly pushUrl: string,
    private readonly node: string,
    private readonly marks: ShippingMarks,
    private readonly report: (what: string, err: unknown) => void,
    { batchLines = 2_000, flushMs = 1_000, maxPending = DEFAULT_MAX_PENDING, timeoutMs = 10_000, gapMs = 60_000 }: ShipperOptions = {},
  ) {
    this.gapMs = gapMs;
    this.batchLines = batchLines;
    this.maxPending = maxPending;
    this.timeoutMs = timeoutMs;
    this.flushMs = flushMs;
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.flushMs);
    this.timer.unref();
  }

  ship(lines: readonly ShippedLine[]): void {
    for (const line of lines) {
      if (this.pending.length < this.maxPending) {
        this.pending.push(line);
        continue;
      }
      this.notShipped += 1;
      this.gapSinceMs ??= Date.now();
      const gap = this.gaps.get(line.botId);
      this.gaps.set(line.botId, { botId: line.botId, lines: (gap?.lines ?? 0) + 1, fromAt: Math.min(gap?.fromAt ?? line.at, line.at), toAt: Math.max(gap?.toAt ?? line.at, line.at) });
    }
  }

  /** Pushes what waits, a batch at a time, unless a push is under way or the back-off holds. */
  flush(nowMs = Date.now()): Promise<void> {
    if (this.pushing !== undefined) return this.pushing;
    if (nowMs < this.retryAtMs && !this.closed) return Promise.resolve();
    this.pushing = this.pushAll().finally(() => (this.pushing = undefined));
    return this.pushing;
  }

  private async pushAll(): Promise<void> {
    let taken = true;
    while (this.pending.length > 0) {
      const batch = this.pending.slice(0, this.batchLines);
      try {
        await this.push(batch);
      } catch (err) {
        this.retryAtMs = Date.now() + this.retryMs;
        this.report(`the log database did not take ${batch.length} lines; tried again in ${Math.round(this.retryMs / 1_000)} s`, err);
        this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
        taken = false;
        break;
      }
      this.pending.splice(0, batch.length);
      this.shipped += batch.length;
      // The lines wait in the order they were kept: all before the batch's last went before it, or as a gap.
      try {
        this.marks.shipped(Math.max(...batch.map((line) => line.seq)));
      } catch (err) {
        this.report('how far the log history was shipped could not be kept', err);
      }
      this.retryMs = RETRY_FIRST_MS;
    }
    // The gaps are said once the database takes lines again, or once it has been away for gapMs: in the history,
    // and so (once it is back) in the database too. A gap's own line may fall in the next gap: it is said then.
    if (this.gaps.size > 0 && (taken || Date.now() - (this.gapSinceMs ?? Date.now()) >= this.gapMs)) {
      const said = [...this.gaps.values()];
      this.gaps.clear();
      this.gapSinceMs = undefined;
      for (const gap of said) this.marks.gap(gap);
    }
  }

  private async push(batch: readonly ShippedLine[]): Promise<void> {
    type LokiStream = { stream: Record<string, string>; values: [string, string][] };
    const streams = new Map<string, LokiStream>();
    for (const line of batch) {
      const labels = { bot: line.botId, run: line.run === null ? '' : new Date(line.run).toISOString(), node: this.node, stream: line.stream };
      const key = JSON.stringify(labels);
      const entry: LokiStream = streams.get(key) ?? { stream: labels, values: [] };
      entry.values.push([shippedNanos(line).toString(), line.text]);
      streams.set(key, entry);
    }
    const reply = await fetch(this.pushUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ streams: [...streams.values()] }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    await reply.body?.cancel();
    if (!reply.ok) throw new Error(`HTTP ${reply.status}`);
  }

  /** Tries once more to push what waits, then stops. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.closed = true;
    await this.flush().catch(() => undefined);
  }
}

/**
 * Ships a store's lines as they are kept (docs/api.md §21), beginning with those a killed agent left unshipped:
 * read before the store writes another line, in the order they were kept, so that how far the shipping went is
 * one number. Past the shipper's bound they are said as gaps, as lines the database did not take in time are.
 */
export function shipHistory(store: LogStore, pushUrl: string, node: string, report: (what: string, err: unknown) => void, options: ShipperOptions = {}): LokiShipper {
  const gap = (found: ShippingGap) => store.append(found.botId, [shippingGapLine(found)]);
  const shipper = new LokiShipper(pushUrl, node, { gap, shipped: (seq) => store.markShipped(seq) }, report, options);
  const left = store.unshipped(options.maxPending ?? DEFAULT_MAX_PENDING);
  shipper.ship(left.lines);
  for (const found of left.left) gap(found);
  store.onWritten = (lines) => shipper.ship(lines);
  shipper.start();
  return shipper;
}
