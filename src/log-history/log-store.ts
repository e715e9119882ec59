import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { StatementSync } from 'node:sqlite';
import { promisify } from 'node:util';
import type { LineMatch } from './line-match.js';
import { setImmediate } from 'node:timers/promises';
import { brotliDecompressSync, constants, zstdCompress, zstdDecompressSync } from 'node:zlib';

const packChunk = promisify(zstdCompress);
/** How every zstd frame begins; chunks packed before zstd (brotli) have no such mark. */
const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
/**
 * zstd's level 9: on log text it keeps about as few bytes as brotli's quality 5 (7 % of the text here) and reads
 * back two to three times as fast, which is most of a long search's time (docs/performance.md).
 */
const ZSTD_LEVEL = 9;
const unpackChunk = (body: Uint8Array): Buffer =>
  body.length >= ZSTD_MAGIC.length && Buffer.from(body.buffer, body.byteOffset, ZSTD_MAGIC.length).equals(ZSTD_MAGIC) ? zstdDecompressSync(body) : brotliDecompressSync(body);

/** Where a line came from: the bot's stdout or stderr, or the agent itself (a gap, a drop: docs/api.md §21). */
export type HistoryStream = 'stdout' | 'stderr' | 'agent';

/** A line as the collector hands it over. */
export interface NewLine {
  readonly at: number;
  /** The start (ms) of the run that wrote it; null where not known. */
  readonly run: number | null;
  readonly stream: HistoryStream;
  readonly text: string;
}

/** A line as kept: `seq` orders the lines of one millisecond, in the order they were kept. */
export interface StoredLine extends NewLine {
  readonly seq: number;
}

/** A place in the order of a bot's lines: a page goes on past it. */
export interface Position {
  readonly at: number;
  readonly seq: number;
}

export interface HistorySearch {
  /** Lines written at or after this time (ms) ... */
  readonly since?: number | undefined;
  /** ... and before this one. */
  readonly until?: number | undefined;
  readonly run?: number | undefined;
  readonly stream?: HistoryStream | undefined;
  readonly match?: LineMatch | undefined;
  /** Text every line that matches contains (a search's substring): a chunk without it is not read line by line. */
  readonly mustContain?: string | undefined;
  readonly order: 'newest' | 'oldest';
  /** Only lines past this place, in `order`. */
  readonly after?: Position | undefined;
  readonly limit: number;
  /** The answer's lines, as `lineBytes` counts them, stay within this. */
  readonly maxBytes: number;
  readonly lineBytes: (line: StoredLine) => number;
  /** Past this, the search answers what it found with the place to go on from. */
  readonly budgetMs: number;
}

export interface HistoryPage {
  readonly lines: StoredLine[];
  /** Where the next page begins; undefined when no line is left. */
  readonly next: Position | undefined;
  /** The search stopped at its budget: lines may be left past `next`. */
  readonly partial: boolean;
}

/** What the retention dropped of one bot, which the bot's history then says. */
export interface Dropped {
  readonly botId: string;
  readonly lines: number;
  readonly fromAt: number;
  readonly toAt: number;
  readonly why: 'days' | 'bytes';
}

export interface Retention {
  readonly days: number;
  readonly botBytes: number;
  readonly totalBytes: number;
}

/** Lines are written once a second, in one transaction: a SIGKILL loses at most the last second's (docs/api.md §21). */
export const FLUSH_MS = 1_000;
/** A bot's recent lines are packed into a compressed chunk past these. */
const CHUNK_LINES = 2_000;
const CHUNK_RAW_BYTES = 256 * 1024;
const CHUNK_AGE_MS = 5 * 60_000;
/** The longest a search holds the event loop at once: it reads chunks in slices of this. */
const SLICE_MS = 10;
/** Lines waiting for their write past this are dropped and counted: a store that cannot keep up holds no more. */
const PENDING_MAX = 100_000;
/** What a recent line costs beyond its text, for the bytes retention counts. */
const ROW_OVERHEAD = 32;

const STREAM_CODES: Record<HistoryStream, string> = { stdout: 'o', stderr: 'e', agent: 'a' };
const STREAMS_BY_CODE: Record<string, HistoryStream> = { o: 'stdout', e: 'stderr', a: 'agent' };

/** A chunk's text: a line each, `at \t seq \t run \t stream \t text`. */
function encode(lines: readonly StoredLine[]): string {
  return lines.map((line) => `${line.at}\t${line.seq}\t${line.run ?? ''}\t${STREAM_CODES[line.stream]}\t${line.text}\n`).join('');
}

function decode(text: string): StoredLine[] {
  const lines: StoredLine[] = [];
  let start = 0;
  while (start < text.length) {
    const end = text.indexOf('\n', start);
    const row = text.slice(start, end);
    start = end + 1;
    const [at = '', seq = '', run = '', stream = ''] = row.split('\t', 4);
    const skip = at.length + seq.length + run.length + stream.length + 4;
    lines.push({ at: Number(at), seq: Number(seq), run: run === '' ? null : Number(run), stream: STREAMS_BY_CODE[stream] ?? 'stdout', text: row.slice(skip) });
  }
  return lines;
}

interface RecentRow {
  seq: number;
  at: number;
  run: number | null;
  stream: string;
  text: string;
}

const stored = (row: RecentRow): StoredLine => ({ at: row.at, seq: row.seq, run: row.run, stream: (row.stream as HistoryStream) ?? 'stdout', text: row.text });

const placeOf = (line: StoredLine | undefined): Position | undefined => line && { at: line.at, seq: line.seq };

/** What a bot has among the recent lines, to know when to pack them. */
interface RecentTally {
  lines: number;
  bytes: number;
  oldestAt: number;
}

/**
 * Every bot's log history on the agent's disk (docs/api.md §21): lines land in a table of recent lines once a
 * second, in one transaction; a bot's recent lines are then packed, in the order of their times, into
 * zstd-compressed chunks (brotli before: still read) indexed by bot and time. A search reads the recent lines and the chunks its range
 * touches, newest (or oldest) first, and stops at its limit, its bytes or its time budget.
 */
export class LogStore {
  private readonly db: DatabaseSync;
  private readonly insert: StatementSync;
  private readonly statements = new Map<string, StatementSync>();
  private pending: Array<NewLine & { readonly botId: string }> = [];
  private readonly tallies = new Map<string, RecentTally>();
  /** Bumped by each forget: a pack begun before it keeps nothing. */
  private readonly forgotten = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private packing: Promise<void> = Promise.resolve();
  /** The bots whose pack is queued, not to be queued twice. */
  private readonly packQueued = new Set<string>();
  /** Lines dropped as they could not be written (a full disk, a store that fell behind). */
  dropped = 0;
  /** Lines written since the store opened. */
  kept = 0;
  /** Told of each batch of lines once written, with their places (the shipping to a log database). */
  onWritten: ((lines: ReadonlyArray<StoredLine & { readonly botId: string }>) => void) | undefined;

  constructor(
    dataDir: string,
    private readonly report: (what: string, err: unknown) => void,
  ) {
    this.db = new DatabaseSync(dataDir === ':memory:' ? ':memory:' : join(dataDir, 'log-history.sqlite'));
    this.db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 2000;');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS recent (seq INTEGER PRIMARY KEY AUTOINCREMENT, bot TEXT NOT NULL, at INTEGER NOT NULL, run INTEGER, stream TEXT NOT NULL, text TEXT NOT NULL);
      CREATE INDEX IF NOT EXISTS recent_bot_at ON recent (bot, at);
      CREATE TABLE IF NOT EXISTS chunks (id INTEGER PRIMARY KEY, bot TEXT NOT NULL, first_at INTEGER NOT NULL, last_at INTEGER NOT NULL, lines INTEGER NOT NULL, raw_bytes INTEGER NOT NULL, bytes INTEGER NOT NULL, body BLOB NOT NULL);
      CREATE INDEX IF NOT EXISTS chunks_bot_last ON chunks (bot, last_at);
      CREATE INDEX IF NOT EXISTS chunks_bot_first ON chunks (bot, first_at);
      CREATE TABLE IF NOT EXISTS runs (bot TEXT NOT NULL, started_at INTEGER NOT NULL, PRIMARY KEY (bot, started_at));
      CREATE TABLE IF NOT EXISTS bots (bot TEXT PRIMARY KEY, owner TEXT);
      CREATE TABLE IF NOT EXISTS shipping (id INTEGER PRIMARY KEY CHECK (id = 1), upto INTEGER NOT NULL);
    `);
    // A chunk's first and last line in the order of keeping, for the lines a log database never took (chunks packed
    // before them: 0, as shipped). One column at a time, each whole: a SIGKILL between them leaves the other to add.
    for (const column of ['min_seq', 'max_seq']) {
      const has = this.statement('SELECT 1 FROM pragma_table_info(?) WHERE name = ?').get('chunks', column) !== undefined;
      if (!has) this.db.exec(`ALTER TABLE chunks ADD COLUMN ${column} INTEGER NOT NULL DEFAULT 0`);
    }
    this.db.exec('CREATE INDEX IF NOT EXISTS chunks_max_seq ON chunks (max_seq)');
    this.insert = this.db.prepare('INSERT INTO recent (bot, at, run, stream, text) VALUES (?, ?, ?, ?, ?)');
    for (const row of this.statement('SELECT bot, COUNT(*) AS lines, SUM(length(text)) AS bytes, MIN(at) AS oldest FROM recent GROUP BY bot').all()) {
      this.tallies.set(String(row.bot), { lines: Number(row.lines), bytes: Number(row.bytes), oldestAt: Number(row.oldest) });
    }
  }

  /** Writes once a second from now on, until close. */
  start(): void {
    this.timer ??= setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /** Keeps the lines with the next write; past PENDING_MAX waiting, they are dropped and counted. */
  append(botId: string, lines: readonly NewLine[]): void {
    const room = Math.max(0, PENDING_MAX - this.pending.length);
    for (const line of lines.slice(0, room)) this.pending.push({ ...line, botId });
    this.dropped += Math.max(0, lines.length - room);
  }

  /** Writes what waits, in one transaction, then packs the bots whose recent lines are due. */
  async flush(nowMs = Date.now()): Promise<void> {
    this.writePending();
    const isDue = (tally: RecentTally | undefined): boolean =>
      tally !== undefined && (tally.lines >= CHUNK_LINES || tally.bytes >= CHUNK_RAW_BYTES || nowMs - tally.oldestAt >= CHUNK_AGE_MS);
    const due = [...this.tallies].filter(([botId, tally]) => !this.packQueued.has(botId) && isDue(tally)).map(([botId]) => botId);
    for (const botId of due) this.packQueued.add(botId);
    this.packing = this.packing.then(async () => {
      for (const botId of due) {
        try {
          // A chunk at a time, while what is left is due (a bot that wrote many chunks' lines in a second).
          for (let packed = true; packed && isDue(this.tallies.get(botId)); ) packed = await this.pack(botId);
        } catch (err) {
          this.report(`bot ${botId}'s log history could not be packed`, err);
        }
        this.packQueued.delete(botId);
      }
    });
    await this.packing;
  }

  private writePending(): void {
    if (this.pending.length > 0) this.write(this.pending.splice(0));
  }

  private write(batch: ReadonlyArray<NewLine & { readonly botId: string }>): void {
    // The lines with their places only for whom they are told to (the shipping): ten thousand a second are garbage else.
    const written: Array<StoredLine & { readonly botId: string }> | undefined = this.onWritten === undefined ? undefined : [];
    try {
      this.db.exec('BEGIN');
      for (const line of batch) {
        const seq = Number(this.insert.run(line.botId, line.at, line.run, line.stream, line.text).lastInsertRowid);
        written?.push({ ...line, seq });
      }
      this.db.exec('COMMIT');
    } catch (err) {
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      this.dropped += batch.length;
      this.report(`${batch.length} log lines could not be kept in the history`, err);
      return;
    }
    this.kept += batch.length;
    if (written !== undefined) this.onWritten?.(written);
    for (const line of batch) {
      const tally = this.tallies.get(line.botId) ?? { lines: 0, bytes: 0, oldestAt: line.at };
      tally.lines += 1;
      tally.bytes += line.text.length;
      tally.oldestAt = Math.min(tally.oldestAt, line.at);
      this.tallies.set(line.botId, tally);
    }
  }

  /** Packs a bot's oldest recent lines (up to a chunk's) into one chunk; the chunk's write and the lines' removal are one transaction. */
  private async pack(botId: string): Promise<boolean> {
    const generation = this.forgotten.get(botId) ?? 0;
    const rows = this
      .statement('SELECT seq, at, run, stream, text FROM recent WHERE bot = ? ORDER BY at, seq LIMIT ?')
      .all(botId, CHUNK_LINES) as unknown as RecentRow[];
    if (rows.length === 0) {
      this.tallies.delete(botId);
      return false;
    }
    const lines = rows.map(stored);
    const seqs = lines.map((line) => line.seq);
    const raw = encode(lines);
    // A window of a chunk's own bound: no more memory for it than a chunk takes.
    const body = await packChunk(Buffer.from(raw), { params: { [constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL, [constants.ZSTD_c_windowLog]: 18 } });
    if ((this.forgotten.get(botId) ?? 0) !== generation || !this.db.isOpen) return false;
    const remove = this.statement('DELETE FROM recent WHERE seq = ?');
    this.db.exec('BEGIN');
    try {
      this
        .statement('INSERT INTO chunks (bot, first_at, last_at, lines, raw_bytes, bytes, body, min_seq, max_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(botId, lines[0]!.at, lines.at(-1)!.at, lines.length, Buffer.byteLength(raw), body.length, body, Math.min(...seqs), Math.max(...seqs));
      for (const line of lines) remove.run(line.seq);
      this.db.exec('COMMIT');
    } catch (err) {
      this.db.exec('ROLLBACK');
      throw err;
    }
    const left = this.statement('SELECT COUNT(*) AS lines, SUM(length(text)) AS bytes, MIN(at) AS oldest FROM recent WHERE bot = ?').get(botId);
    if (Number(left?.lines ?? 0) === 0) this.tallies.delete(botId);
    else this.tallies.set(botId, { lines: Number(left!.lines), bytes: Number(left!.bytes), oldestAt: Number(left!.oldest) });
    return true;
  }

  /** The bot's lines the search asks for, in its order (docs/api.md §21). */
  async search(botId: string, search: HistorySearch): Promise<HistoryPage> {
    const began = performance.now();
    // Lines not yet written are written first: a search just after a line finds it, and a page's places are the lines' own.
    this.writePending();
    const newest = search.order === 'newest';
    const before = (a: Position, b: Position): boolean => a.at < b.at || (a.at === b.at && a.seq < b.seq);
    const inOrder = (a: Position, b: Position): number => (newest ? b.at - a.at || b.seq - a.seq : a.at - b.at || a.seq - b.seq);
    const after = search.after;
    const pastCursor = after === undefined ? () => true : newest ? (line: Position) => before(line, after) : (line: Position) => before(after, line);
    const wanted = (line: StoredLine): boolean =>
      (search.since === undefined || line.at >= search.since) &&
      (search.until === undefined || line.at < search.until) &&
      (search.run === undefined || line.run === search.run) &&
      (search.stream === undefined || line.stream === search.stream) &&
      pastCursor(line) &&
      (search.match === undefined || search.match(line.text));
    // The times the range (and the cursor) leave: chunks wholly outside them are not read.
    const low = Math.max(search.since ?? -Infinity, !newest && after ? after.at : -Infinity);
    const high = Math.min(search.until ?? Infinity, newest && after ? after.at + 1 : Infinity);
    const lowSql = Number.isFinite(low) ? low : Number.MIN_SAFE_INTEGER;
    const highSql = Number.isFinite(high) ? high : Number.MAX_SAFE_INTEGER;

    let candidates: StoredLine[] = (
      this.statement('SELECT seq, at, run, stream, text FROM recent WHERE bot = ? AND at >= ? AND at < ?').all(botId, lowSql, highSql) as unknown as RecentRow[]
    )
      .map(stored)
      .filter(wanted);
    const chunks = this
      .statement(`SELECT id, first_at, last_at FROM chunks WHERE bot = ? AND last_at >= ? AND first_at < ? ORDER BY ${newest ? 'last_at DESC' : 'first_at ASC'}`)
      .all(botId, lowSql, highSql) as unknown as Array<{ id: number; first_at: number; last_at: number }>;
    const body = this.statement('SELECT body FROM chunks WHERE id = ?');

    const lines: StoredLine[] = [];
    let bytes = 0;
    let full = false;
    /** Answers the candidates that no chunk not yet read can come before, in order, until the page is full. */
    const answerFinal = (final: (line: StoredLine) => boolean): void => {
      candidates.sort(inOrder);
      const kept: StoredLine[] = [];
      for (const line of candidates) {
        if (full || !final(line)) {
          kept.push(line);
          continue;
        }
        const size = search.lineBytes(line);
        if (lines.length >= search.limit || bytes + size > search.maxBytes) {
          full = true;
          kept.push(line);
          continue;
        }
        lines.push(line);
        bytes += size;
      }
      candidates = kept;
    };
    const needle = search.mustContain === undefined ? undefined : Buffer.from(search.mustContain);
    const rowsMatch = (rows: string): string => (search.match?.anyOf === undefined || search.match.unanchored !== true || search.match.anyOf(rows) ? rows : '');
    /** A chunk's rows; '' for one that holds no match; undefined for one that cannot be read. */
    const unpack = (id: number): string | undefined => {
      const packed = body.get(id) as { body: Uint8Array } | undefined;
      if (packed === undefined) return undefined;
      try {
        const raw = unpackChunk(packed.body);
        // A chunk without the text every match has is passed over as bytes, never decoded; one a pattern without
        // `^` finds nothing in (its rows' fields and all) is passed over as text.
        return needle !== undefined && !raw.includes(needle) ? '' : rowsMatch(raw.toString());
      } catch (err) {
        this.report(`a chunk of bot ${botId}'s log history could not be read; its lines are left out`, err);
        return undefined;
      }
    };
    let sliceBegan = performance.now();
    for (const chunk of chunks) {
      const frontier = newest ? chunk.last_at : chunk.first_at;
      answerFinal(newest ? (line) => line.at > frontier : (line) => line.at < frontier);
      if (full) return { lines, next: placeOf(lines.at(-1)), partial: false };
      if (performance.now() - began > search.budgetMs) {
        // Every line past the frontier was looked at; those at it and beyond were not all.
        const next = newest ? { at: frontier + 1, seq: 0 } : { at: frontier - 1, seq: Number.MAX_SAFE_INTEGER };
        return { lines, next, partial: true };
      }
      // Unpacked here, not on the thread pool (whose hand-over costs more than a chunk's unpacking), in slices
      // that leave the event loop to others between them.
      if (performance.now() - sliceBegan > SLICE_MS) {
        await setImmediate();
        sliceBegan = performance.now();
      }
      const text = unpack(chunk.id);
      if (text === undefined || text === '') continue;
      const decoded = decode(text);
      if (search.match?.anyOf !== undefined && search.match.unanchored !== true && !search.match.anyOf(decoded.map((line) => line.text).join('\n'))) continue;
      for (const line of decoded) if (wanted(line)) candidates.push(line);
    }
    answerFinal(() => true);
    return { lines, next: full ? placeOf(lines.at(-1)) : undefined, partial: false };
  }

  /**
   * The lines of several bots a search asks for, merged in its order (a fleet's search, docs/api.md §21): each
   * bot's best `limit`, within one time budget; past it, `partial` and no more bots read.
   */
  async searchBots(botIds: readonly string[], search: HistorySearch): Promise<{ lines: Array<StoredLine & { botId: string }>; partial: boolean }> {
    const began = performance.now();
    const found: Array<StoredLine & { botId: string }> = [];
    let partial = false;
    for (const botId of botIds) {
      const left = search.budgetMs - (performance.now() - began);
      if (left <= 0) {
        partial = true;
        break;
      }
      const page = await this.search(botId, { ...search, budgetMs: left });
      partial ||= page.partial;
      for (const line of page.lines) found.push({ ...line, botId });
    }
    const newest = search.order === 'newest';
    found.sort((a, b) => (newest ? b.at - a.at || b.seq - a.seq : a.at - b.at || a.seq - b.seq));
    return { lines: found.slice(0, search.limit), partial };
  }

  /** The bot's newest kept line's time, and the texts of its lines at that millisecond (where a follow taken up again begins). */
  async newest(botId: string): Promise<{ at: number; texts: string[] } | undefined> {
    const { lines } = await this.search(botId, { order: 'newest', limit: 200, maxBytes: Infinity, lineBytes: () => 0, budgetMs: Infinity });
    const own = lines.filter((line) => line.stream !== 'agent');
    const at = own[0]?.at;
    return at === undefined ? undefined : { at, texts: own.filter((line) => line.at === at).map((line) => line.text) };
  }

  /** The starts of the bot's runs the history knows, oldest first. */
  runStarts(botId: string): number[] {
    return this
      .statement('SELECT started_at FROM runs WHERE bot = ? ORDER BY started_at')
      .all(botId)
      .map((row) => Number(row.started_at));
  }

  /** The bot has lines here, and this owner: a fleet's search by owner finds it, also once it moved away. */
  noteBot(botId: string, owner: string | undefined): void {
    this.statement('INSERT INTO bots (bot, owner) VALUES (?, ?) ON CONFLICT (bot) DO UPDATE SET owner = excluded.owner').run(botId, owner ?? null);
  }

  /** The bots whose lines are kept here (of `owner` alone, when given). */
  knownBots(owner?: string): string[] {
    const rows = owner === undefined ? this.statement('SELECT bot FROM bots ORDER BY bot').all() : this.statement('SELECT bot FROM bots WHERE owner = ? ORDER BY bot').all(owner);
    return rows.map((row) => String(row.bot));
  }

  /** A statement compiled once and kept: the store runs the same few again and again (a run noted for each start of each bot). */
  private statement(sql: string): StatementSync {
    let statement = this.statements.get(sql);
    if (statement === undefined) this.statements.set(sql, (statement = this.db.prepare(sql)));
    return statement;
  }

  noteRun(botId: string, startedAt: number): void {
    this.statement('INSERT OR IGNORE INTO runs (bot, started_at) VALUES (?, ?)').run(botId, startedAt);
  }

  /** The bytes a bot's history takes (its chunks, compressed, and its recent lines). */
  bytesOf(botId: string): number {
    const chunks = Number(this.statement('SELECT COALESCE(SUM(bytes), 0) AS bytes FROM chunks WHERE bot = ?').get(botId)?.bytes ?? 0);
    const tally = this.tallies.get(botId);
    return chunks + (tally ? tally.bytes + tally.lines * ROW_OVERHEAD : 0);
  }

  /** The chunks' lines and bytes, and the raw bytes those lines had (the compression the bench reports). */
  packedSize(): { lines: number; bytes: number; rawBytes: number } {
    const row = this.statement('SELECT COALESCE(SUM(lines), 0) AS lines, COALESCE(SUM(bytes), 0) AS bytes, COALESCE(SUM(raw_bytes), 0) AS raw FROM chunks').get();
    return { lines: Number(row?.lines ?? 0), bytes: Number(row?.bytes ?? 0), rawBytes: Number(row?.raw ?? 0) };
  }

  /**
   * Drops, oldest first, the chunks past the retention: older than `days`, then a bot's past `botBytes`, then
   * the oldest of all past `totalBytes`. Answers what went of each bot, for its history to say so.
   */
  enforce(retention: Retention, nowMs = Date.now()): Dropped[] {
    const dropped: Dropped[] = [];
    const dropChunks = (rows: Array<{ id: number; bot: string; lines: number; first_at: number; last_at: number }>, why: Dropped['why']): void => {
      const byBot = new Map<string, Dropped>();
      const remove = this.statement('DELETE FROM chunks WHERE id = ?');
      this.db.exec('BEGIN');
      for (const row of rows) {
        remove.run(row.id);
        const was = byBot.get(row.bot);
        byBot.set(row.bot, {
          botId: row.bot,
          lines: (was?.lines ?? 0) + Number(row.lines),
          fromAt: Math.min(was?.fromAt ?? Infinity, Number(row.first_at)),
          toAt: Math.max(was?.toAt ?? -Infinity, Number(row.last_at)),
          why,
        });
      }
      this.db.exec('COMMIT');
      dropped.push(...byBot.values());
    };
    type ChunkRow = { id: number; bot: string; lines: number; first_at: number; last_at: number; bytes: number };
    const cutoff = nowMs - retention.days * 86_400_000;
    dropChunks(this.statement('SELECT id, bot, lines, first_at, last_at FROM chunks WHERE last_at < ?').all(cutoff) as unknown as ChunkRow[], 'days');
    for (const row of this.statement('SELECT bot, SUM(bytes) AS bytes FROM chunks GROUP BY bot HAVING SUM(bytes) > ?').all(retention.botBytes)) {
      let over = Number(row.bytes) - retention.botBytes;
      const oldest = this.statement('SELECT id, bot, lines, first_at, last_at, bytes FROM chunks WHERE bot = ? ORDER BY first_at').all(String(row.bot)) as unknown as ChunkRow[];
      const going = oldest.filter((chunk) => (over > 0 ? ((over -= Number(chunk.bytes)), true) : false));
      dropChunks(going, 'bytes');
    }
    let overAll = Number(this.statement('SELECT COALESCE(SUM(bytes), 0) AS bytes FROM chunks').get()?.bytes ?? 0) - retention.totalBytes;
    if (overAll > 0) {
      const going: ChunkRow[] = [];
      for (const chunk of this.db.prepare('SELECT id, bot, lines, first_at, last_at, bytes FROM chunks ORDER BY first_at').iterate() as unknown as Iterable<ChunkRow>) {
        if (overAll <= 0) break;
        going.push(chunk);
        overAll -= Number(chunk.bytes);
      }
      dropChunks(going, 'bytes');
    }
    return dropped;
  }

  /** Every kept line up to `seq` (in the order of keeping) is in the log database, or was said as a gap (docs/api.md §21). */
  markShipped(seq: number): void {
    this.statement('INSERT INTO shipping (id, upto) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET upto = max(upto, excluded.upto)').run(seq);
  }

  /** No log database is shipped to from this store: one configured later begins with the lines kept from then on. */
  forgetShipping(): void {
    this.statement('DELETE FROM shipping').run();
  }

  /**
   * The kept lines the log database never took (the agent was killed while they waited for it), read before any
   * line is written after them: at most `max`, in the order they were kept, and the rest of each bot's as a gap. A
   * store never shipped from has none: it begins at its last line.
   */
  unshipped(max: number): { lines: Array<StoredLine & { botId: string }>; left: Array<{ botId: string; lines: number; fromAt: number; toAt: number }> } {
    const mark = this.statement('SELECT upto FROM shipping WHERE id = 1').get();
    if (mark === undefined) {
      this.markShipped(Number(this.statement("SELECT seq FROM sqlite_sequence WHERE name = 'recent'").get()?.seq ?? 0));
      return { lines: [], left: [] };
    }
    const upto = Number(mark.upto);
    const lines: Array<StoredLine & { botId: string }> = [];
    const gaps = new Map<string, { botId: string; lines: number; fromAt: number; toAt: number }>();
    const left = (botId: string, count: number, fromAt: number, toAt: number): void => {
      const gap = gaps.get(botId);
      gaps.set(botId, { botId, lines: (gap?.lines ?? 0) + count, fromAt: Math.min(gap?.fromAt ?? fromAt, fromAt), toAt: Math.max(gap?.toAt ?? toAt, toAt) });
    };
    // A bot's packed lines are older than its recent ones: the chunks first, then the recent lines.
    const chunks = this.statement('SELECT id, bot, lines, first_at, last_at, min_seq FROM chunks WHERE max_seq > ? ORDER BY min_seq').all(upto);
    for (const chunk of chunks) {
      const botId = String(chunk.bot);
      if (lines.length >= max && Number(chunk.min_seq) > upto) {
        left(botId, Number(chunk.lines), Number(chunk.first_at), Number(chunk.last_at));
        continue;
      }
      const body = this.statement('SELECT body FROM chunks WHERE id = ?').get(Number(chunk.id))?.body as Uint8Array;
      const found = decode(unpackChunk(body).toString('utf8')).filter((line) => line.seq > upto);
      const room = Math.max(0, max - lines.length);
      for (const line of found.slice(0, room)) lines.push({ ...line, botId });
      for (const line of found.slice(room)) left(botId, 1, line.at, line.at);
    }
    const room = Math.max(0, max - lines.length);
    const recent = this.statement('SELECT seq, bot, at, run, stream, text FROM recent WHERE seq > ? ORDER BY seq LIMIT ?').all(upto, room) as unknown as Array<RecentRow & { bot: string }>;
    for (const row of recent) lines.push({ ...stored(row), botId: String(row.bot) });
    const after = recent.length < room ? Infinity : Number(recent.at(-1)?.seq ?? upto);
    if (Number.isFinite(after)) {
      for (const row of this.statement('SELECT bot, COUNT(*) AS lines, MIN(at) AS from_at, MAX(at) AS to_at FROM recent WHERE seq > ? GROUP BY bot').all(after)) {
        left(String(row.bot), Number(row.lines), Number(row.from_at), Number(row.to_at));
      }
    }
    return { lines: lines.sort((a, b) => a.seq - b.seq), left: [...gaps.values()] };
  }

  /** Everything of the bot's, gone (its removal). */
  forget(botId: string): void {
    this.forgotten.set(botId, (this.forgotten.get(botId) ?? 0) + 1);
    this.pending = this.pending.filter((line) => line.botId !== botId);
    this.tallies.delete(botId);
    this.db.exec('BEGIN');
    for (const table of ['recent', 'chunks', 'runs', 'bots']) this.statement(`DELETE FROM ${table} WHERE bot = ?`).run(botId);
    this.db.exec('COMMIT');
  }

  /** Writes what waits, and closes. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.packing;
    this.writePending();
    this.db.close();
  }
}
