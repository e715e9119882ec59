import { OperationFailed } from '../errors.js';
import { shippedNanos } from './log-shipping.js';
import type { HistoryPage, HistorySearch, StoredLine } from './log-store.js';

/** A search of the log database: the history's own, its substring and pattern as text (LogsQL runs them). */
export type DatabaseSearch = Omit<HistorySearch, 'match' | 'mustContain'> & { readonly q?: string | undefined; readonly regex?: string | undefined };

/** The most of the database's answer read: a page's lines (within 4 MiB of JSON) and their labels, twice over. */
const ANSWER_MAX_BYTES = 16 * 1024 * 1024;

/** An answer's text, read to at most `maxBytes`: the database's answer is input like any other. */
async function boundedText(reply: Response, maxBytes: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of reply.body ?? []) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      await reply.body?.cancel();
      throw new OperationFailed(`the log database's answer passed ${maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A LogsQL string: quoted as Go reads it (JSON's escapes are Go's). */
const quoted = (text: string): string => JSON.stringify(text);
/** A regular expression (RE2, as LogsQL's) that matches `text` itself. */
const literally = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A time of the database's, to the nanosecond, from a line's place (the shipper's `shippedNanos`). */
function nanosIso(nanos: bigint): string {
  const ms = nanos / 1_000_000n;
  const iso = new Date(Number(ms)).toISOString();
  return `${iso.slice(0, 19)}.${(nanos % 1_000_000_000n).toString().padStart(9, '0')}Z`;
}

/** The LogsQL query of a bot's search, newest or oldest first, a page's worth. */
export function logsQlOf(botId: string, search: DatabaseSearch): string {
  const filters = [`{bot=${quoted(botId)}}`];
  if (search.since !== undefined) filters.push(`_time:>=${new Date(search.since).toISOString()}`);
  if (search.until !== undefined) filters.push(`_time:<${new Date(search.until).toISOString()}`);
  if (search.after !== undefined) filters.push(`_time:${search.order === 'newest' ? '<' : '>'}${nanosIso(shippedNanos(search.after))}`);
  if (search.run !== undefined) filters.push(`run:=${quoted(new Date(search.run).toISOString())}`);
  if (search.stream !== undefined) filters.push(`stream:=${quoted(search.stream)}`);
  if (search.q !== undefined) filters.push(`_msg:~${quoted(literally(search.q))}`);
  if (search.regex !== undefined) filters.push(`_msg:~${quoted(search.regex)}`);
  return `${filters.join(' ')} | sort by (_time${search.order === 'newest' ? ' desc' : ''}) | limit ${search.limit}`;
}

interface DatabaseRow {
  readonly _msg?: string;
  readonly _time?: string;
  readonly run?: string;
  readonly stream?: string;
}

/** A row's line: its millisecond, and its place below it (the shipper put the history's order there). */
function lineOf(row: DatabaseRow): StoredLine {
  const time = row._time ?? '';
  const fraction = /\.(\d{1,9})Z$/.exec(time)?.[1]?.padEnd(9, '0') ?? '000000000';
  return {
    at: Date.parse(time),
    seq: Number(fraction.slice(3)),
    run: row.run ? Date.parse(row.run) : null,
    stream: row.stream === 'stderr' || row.stream === 'agent' ? row.stream : 'stdout',
    text: row._msg ?? '',
  };
}

/**
 * A bot's history searched in the log database (VictoriaLogs' LogsQL over HTTP, docs/api.md §21): the same
 * answer as the agent's own store gives, from every node's lines. Past its budget, an answer with no lines
 * and `partial`, its cursor where it began.
 */
export async function searchVictoriaLogs(baseUrl: string, botId: string, search: DatabaseSearch): Promise<HistoryPage> {
  const body = new URLSearchParams({ query: logsQlOf(botId, search) });
  let text: string;
  try {
    const reply = await fetch(new URL('/select/logsql/query', baseUrl), { method: 'POST', body, signal: AbortSignal.timeout(search.budgetMs) });
    text = await boundedText(reply, ANSWER_MAX_BYTES);
    if (!reply.ok) throw new OperationFailed(`the log database refused the search: HTTP ${reply.status} ${text.slice(0, 200)}`);
  } catch (err) {
    if (err instanceof DOMException && err.name === 'TimeoutError') return { lines: [], next: search.after, partial: true };
    if (err instanceof OperationFailed) throw err;
    throw new OperationFailed(`the log database could not be searched: ${(err as Error).message}`);
  }
  const lines: StoredLine[] = [];
  let bytes = 0;
  const rows = text.split('\n').filter((row) => row !== '');
  for (const row of rows) {
    const line = lineOf(JSON.parse(row) as DatabaseRow);
    const size = search.lineBytes(line);
    if (bytes + size > search.maxBytes) return { lines, next: lines.at(-1) && { at: lines.at(-1)!.at, seq: lines.at(-1)!.seq }, partial: false };
    lines.push(line);
    bytes += size;
  }
  const last = lines.at(-1);
  return { lines, next: rows.length >= search.limit && last ? { at: last.at, seq: last.seq } : undefined, partial: false };
}
