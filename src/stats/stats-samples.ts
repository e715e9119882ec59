import { readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { replaceDurably } from '../durable-file.js';
import { mapLimited } from '../map-limited.js';
import { PRIVATE_DIR_MODE } from '../private-files.js';
import type { BotStats, RuntimeDriver } from '../runtime/driver.js';

/** One reading of a bot, as the console's sparklines and charts draw it. */
export interface StatsSample {
  /** When it was taken, ms since the epoch. */
  readonly at: number;
  readonly cpuPercent: number;
  readonly memoryBytes: number;
  /** The run's network bytes so far; null where the runtime does not tell them (Kubernetes). */
  readonly networkRxBytes: number | null;
  readonly networkTxBytes: number | null;
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
  /** Where the samples are kept across the agent's restarts (docs/api.md §12); none: in memory only. */
  readonly file?: string;
  /** How often they are written there, besides at close. */
  readonly saveEveryMs?: number;
  readonly now?: () => number;
}

/**
 * A bot's last samples, oldest overwritten first: typed arrays, 20 bytes a sample, and 16 more for the network
 * counters once the runtime gives any (never on Kubernetes).
 */
class SampleRing {
  private readonly at: Float64Array;
  private readonly cpu: Float32Array;
  private readonly memory: Float64Array;
  private received: Float64Array | undefined;
  private sent: Float64Array | undefined;
  private next = 0;
  size = 0;

  constructor(readonly capacity: number) {
    this.at = new Float64Array(capacity);
    this.cpu = new Float32Array(capacity);
    this.memory = new Float64Array(capacity);
  }

  add(sample: StatsSample): void {
    this.at[this.next] = sample.at;
    this.cpu[this.next] = sample.cpuPercent;
    this.memory[this.next] = sample.memoryBytes;
    if ((sample.networkRxBytes !== null || sample.networkTxBytes !== null) && !this.received) {
      this.received = new Float64Array(this.capacity).fill(Number.NaN);
      this.sent = new Float64Array(this.capacity).fill(Number.NaN);
    }
    if (this.received && this.sent) {
      this.received[this.next] = sample.networkRxBytes ?? Number.NaN;
      this.sent[this.next] = sample.networkTxBytes ?? Number.NaN;
    }
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  /** The samples taken after `since`, oldest first. */
  since(since: number): StatsSample[] {
    const samples: StatsSample[] = [];
    for (let i = 0; i < this.size; i += 1) {
      const slot = this.slot(i);
      const at = this.at[slot]!;
      if (at > since) samples.push({ at, cpuPercent: this.cpu[slot]!, memoryBytes: this.memory[slot]!, networkRxBytes: orNull(this.received?.[slot]), networkTxBytes: orNull(this.sent?.[slot]) });
    }
    return samples;
  }

  /** When the newest sample was taken; 0 when there is none. */
  newest(): number {
    return this.size === 0 ? 0 : this.at[(this.next - 1 + this.capacity) % this.capacity]!;
  }

  get bytes(): number {
    return SampleRing.bytesEach(this.capacity) + (this.received ? this.capacity * 16 : 0);
  }

  static bytesEach(capacity: number): number {
    return capacity * (8 + 4 + 8);
  }

  /** The i-th oldest sample's slot. */
  private slot(i: number): number {
    return (this.next - this.size + i + this.capacity) % this.capacity;
  }

  /** The most bytes `encode` writes. */
  get encodedBytes(): number {
    return 3 + this.size * (20 + (this.received ? 16 : 0));
  }

  /** Its samples after `since`, oldest first, in the kept file's form (see MAGIC). */
  encode(since: number, out: SampleWriter): void {
    let first = 0;
    while (first < this.size && this.at[this.slot(first)]! <= since) first += 1;
    out.u16(this.size - first);
    out.u8(this.received ? 1 : 0);
    for (let i = first; i < this.size; i += 1) {
      const slot = this.slot(i);
      out.f64(this.at[slot]!);
      out.f32(this.cpu[slot]!);
      out.f64(this.memory[slot]!);
      if (this.received && this.sent) {
        out.f64(this.received[slot]!);
        out.f64(this.sent[slot]!);
      }
    }
  }
}

const orNull = (value: number | undefined): number | null => (value === undefined || Number.isNaN(value) ? null : value);

/**
 * The kept file: `BAS1`, the number of bots, then each bot's id (its UTF-8 length in two bytes), its number of
 * samples (two bytes), whether they carry the network's counters (one byte), and each sample, oldest first:
 * when (f64), CPU (f32), memory (f64) and, where carried, bytes received and sent (f64 each), little-endian.
 */
const MAGIC = 0x31534142; // "BAS1", little-endian

/** Writes the file's fields into a buffer that grows as needed. */
class SampleWriter {
  private buffer: Buffer;
  length = 0;

  /** `capacity`: the bytes it will take, so that a fleet's samples are one buffer, never copied as it grows. */
  constructor(capacity: number) {
    this.buffer = Buffer.alloc(capacity);
  }

  private room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.alloc(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }

  u8(value: number): void {
    this.room(1);
    this.length = this.buffer.writeUInt8(value, this.length);
  }

  u16(value: number): void {
    this.room(2);
    this.length = this.buffer.writeUInt16LE(value, this.length);
  }

  u32(value: number): void {
    this.room(4);
    this.length = this.buffer.writeUInt32LE(value, this.length);
  }

  f32(value: number): void {
    this.room(4);
    this.length = this.buffer.writeFloatLE(value, this.length);
  }

  f64(value: number): void {
    this.room(8);
    this.length = this.buffer.writeDoubleLE(value, this.length);
  }

  text(value: string): void {
    const bytes = Buffer.from(value, 'utf8');
    this.u16(bytes.length);
    this.room(bytes.length);
    this.length += bytes.copy(this.buffer, this.length);
  }

  /** Sets a u32 written earlier, at `offset`. */
  u32At(offset: number, value: number): void {
    this.buffer.writeUInt32LE(value, offset);
  }

  bytes(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}

/** Reads the kept file back: each bot's samples, or throws at the first field out of bounds. */
function* decodeSamples(data: Buffer): Generator<[string, StatsSample[]]> {
  let at = 0;
  const need = (bytes: number): number => {
    if (at + bytes > data.length) throw new Error('the samples file ends early');
    const from = at;
    at += bytes;
    return from;
  };
  if (data.readUInt32LE(need(4)) !== MAGIC) throw new Error('not a samples file');
  const bots = data.readUInt32LE(need(4));
  for (let bot = 0; bot < bots; bot += 1) {
    const idLength = data.readUInt16LE(need(2));
    const botId = data.toString('utf8', need(idLength), at);
    const count = data.readUInt16LE(need(2));
    const withNetwork = data.readUInt8(need(1)) === 1;
    const samples: StatsSample[] = [];
    for (let i = 0; i < count; i += 1) {
      const when = data.readDoubleLE(need(8));
      const cpuPercent = data.readFloatLE(need(4));
      const memoryBytes = data.readDoubleLE(need(8));
      const networkRxBytes = withNetwork ? orNull(data.readDoubleLE(need(8))) : null;
      const networkTxBytes = withNetwork ? orNull(data.readDoubleLE(need(8))) : null;
      samples.push({ at: when, cpuPercent, memoryBytes, networkRxBytes, networkTxBytes });
    }
    yield [botId, samples];
  }
  if (at !== data.length) throw new Error('the samples file has bytes past its end');
}

/**
 * The last 15 minutes of every running bot's CPU, memory and network, read every 15 s and kept in memory
 * (docs/api.md §12): one small ring per bot, dropped once its newest sample is older than what is kept. A
 * round still under way when the next is due makes that one wait; a bot whose reading fails is skipped for
 * the round. With a file, they are written there each minute and at close, and read back at start: an agent
 * started again (an upgrade) draws the same charts.
 */
export class StatsSamples {
  readonly intervalMs: number;
  readonly keepMs: number;
  private readonly concurrency: number;
  private readonly maxBots: number;
  private readonly now: () => number;
  private readonly capacity: number;
  private readonly file: string | undefined;
  private readonly saveEveryMs: number;
  private readonly rings = new Map<string, SampleRing>();
  private timer: NodeJS.Timeout | undefined;
  private saver: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private saving: Promise<void> = Promise.resolve();
  /** Whether a round kept samples since they were last written. */
  private unsaved = false;

  constructor(
    private readonly driver: Pick<RuntimeDriver, 'runningBots' | 'stats' | 'statsRound'>,
    { intervalMs = 15_000, keepMs = 15 * 60_000, concurrency = 100, maxBots = 20_000, file, saveEveryMs = 60_000, now = Date.now }: StatsSamplesOptions = {},
    private readonly report: (what: string, err: unknown) => void = () => undefined,
  ) {
    this.intervalMs = intervalMs;
    this.keepMs = keepMs;
    this.concurrency = concurrency;
    this.maxBots = maxBots;
    this.now = now;
    this.capacity = Math.ceil(keepMs / intervalMs) + 1;
    this.file = file;
    this.saveEveryMs = saveEveryMs;
  }

  /** Reads back what an earlier life kept (before the agent answers its first call), then every running bot now and every interval, until close. */
  start(): void {
    if (this.timer) return;
    this.load();
    this.timer = setInterval(() => void this.sample(), this.intervalMs).unref();
    void this.sample();
    if (this.file !== undefined) this.saver = setInterval(() => void this.save(), this.saveEveryMs).unref();
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
    let bytes = 0;
    for (const ring of this.rings.values()) bytes += ring.bytes;
    return bytes;
  }

  /** Writes the samples of the kept span to the file, whole, in place of the last (none without a file). */
  save(): Promise<void> {
    if (this.file === undefined) return Promise.resolve();
    const file = this.file;
    this.saving = this.saving.then(async () => {
      if (!this.unsaved) return;
      this.unsaved = false;
      try {
        await mkdir(dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
        await replaceDurably(file, this.encode());
      } catch (err) {
        this.unsaved = true;
        this.report('the stats samples could not be written to AGENT_DATA_DIR; tried again in a minute', err);
      }
    });
    return this.saving;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.saver);
    this.timer = undefined;
    this.saver = undefined;
    await this.round;
    await this.save();
  }

  private encode(): Buffer {
    const since = this.now() - this.keepMs;
    let capacity = 8;
    for (const [botId, ring] of this.rings) capacity += 2 + Buffer.byteLength(botId) + ring.encodedBytes;
    const out = new SampleWriter(capacity);
    out.u32(MAGIC);
    const countAt = out.length;
    out.u32(0);
    let bots = 0;
    for (const [botId, ring] of this.rings) {
      if (ring.newest() <= since) continue;
      out.text(botId);
      ring.encode(since, out);
      bots += 1;
    }
    out.u32At(countAt, bots);
    return out.bytes();
  }

  /** What the file holds of the kept span; a file missing, or not whole (never so: it is replaced whole), is none. */
  private load(): void {
    if (this.file === undefined) return;
    let data: Buffer;
    try {
      data = readFileSync(this.file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.report('the stats samples kept in AGENT_DATA_DIR could not be read; the charts begin afresh', err);
      return;
    }
    let kept: [string, StatsSample[]][];
    try {
      kept = [...decodeSamples(data)];
    } catch (err) {
      this.report('the stats samples kept in AGENT_DATA_DIR are not whole; the charts begin afresh', err);
      return;
    }
    const since = this.now() - this.keepMs;
    for (const [botId, samples] of kept) {
      const recent = samples.filter((sample) => sample.at > since).slice(-this.capacity);
      if (recent.length === 0 || (!this.rings.has(botId) && this.rings.size >= this.maxBots)) continue;
      let ring = this.rings.get(botId);
      if (!ring) {
        ring = new SampleRing(this.capacity);
        this.rings.set(botId, ring);
      }
      for (const sample of recent) ring.add(sample);
    }
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
    ring.add({ at: this.now(), cpuPercent: stats.cpuPercent, memoryBytes: stats.memoryBytes, networkRxBytes: stats.io?.networkRxBytes ?? null, networkTxBytes: stats.io?.networkTxBytes ?? null });
    this.unsaved = true;
  }
}
