import Router from '@koa/router';
import { BadRequest, messages, NotImplemented, OperationFailed } from '../errors.js';
import { boundedJson, fleetRequest } from '../fleet/fleet-client.js';
import { urlOnNode } from '../fleet/node-beacon.js';
import type { NodeBeacon } from '../fleet/node-beacon.js';
import type { LogCollector } from '../log-history/log-collector.js';
import { lineMatcher } from '../log-history/line-match.js';
import type { HistoryPage, HistoryStream, Position, StoredLine } from '../log-history/log-store.js';
import { decodeNodeCursors, encodeNodeCursors, isNodeCursor, mergeParts } from '../log-history/nodes-search.js';
import type { NodeCursors, NodePart } from '../log-history/nodes-search.js';
import { SearchSlots } from '../log-history/search-slots.js';
import { searchVictoriaLogs } from '../log-history/victorialogs-search.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Access } from './access.js';
import { botIdInPath, DEFAULT_HISTORY_LINES, fleetLogHistoryQuery, logHistoryQuery, validateQuery } from './schemas.js';

/** An answer's lines stay within the logs' 4 MiB (docs/api.md §2), the envelope's own fields aside. */
const ANSWER_LINES_MAX_BYTES = 4 * 1024 * 1024 - 4 * 1024;
/** A search past this answers what it found, with `partial` and the place to go on from. */
export const SEARCH_BUDGET_MS = 2_000;
/** Searches under way at once in the agent: each may hold a core for its budget. */
const SEARCHES_AT_ONCE = 4;

export interface LogHistoryRoutesDeps {
  readonly driver: RuntimeDriver;
  /** Undefined where the agent keeps no history (AGENT_LOG_HISTORY=off): the path answers 501. */
  readonly logHistory: LogCollector | undefined;
  readonly access: Access;
  /** This agent's node, and the fleet's others a search of every bot asks too (within AGENT_FLEET_KEY). */
  readonly node: string;
  readonly fleet?: { readonly nodes: Pick<NodeBeacon, 'nodes'>; readonly fleetKey: string } | undefined;
}

/** A line of a search over every bot: whose, and on which node. */
type FleetLine = ReturnType<typeof lineView> & { readonly bot_id: string; readonly node: string };

/** The header with which another node's agent asks for this node's own lines of a bot, never the fleet's again. */
const OWN_PART = 'x-bot-agent-search';
/** A node's own place in its history, as its cursors give it. */
const POSITION = /^\d{1,16}-\d{1,16}$/;

/** How long another node has to answer its part of a fleet's search: its own budget, and a second more. */
const OTHER_NODE_SEARCH_MS = SEARCH_BUDGET_MS + 1_000;

/** A line as an answer shows it. */
type LineView = ReturnType<typeof lineView>;
const lineView = (line: StoredLine) => ({
  at: new Date(line.at).toISOString(),
  run: line.run === null ? null : new Date(line.run).toISOString(),
  stream: line.stream,
  line: line.text,
});

const cursorOf = (position: Position | undefined): string | null => (position === undefined ? null : `${position.at}-${position.seq}`);

/** A bot's log history, searched (docs/api.md §21): the bot itself, or the platform. */
export function logHistoryRoutes({ driver, logHistory, access, node, fleet }: LogHistoryRoutesDeps): Router {
  const router = new Router();
  const slots = new SearchSlots(SEARCHES_AT_ONCE);

  /** The other nodes' parts of a fleet's search (each searches its own bots), and the nodes that gave none in time. */
  async function otherNodesLines(query: Record<string, string>, onlyNode: string | undefined): Promise<{ lines: FleetLine[]; missing: string[]; partial: boolean }> {
    if (fleet === undefined) return { lines: [], missing: [], partial: false };
    const others = (await fleet.nodes.nodes()).filter((one) => !one.self && (onlyNode === undefined || one.node === onlyNode));
    type Part = { readonly lines: FleetLine[]; readonly partial: boolean } | { readonly missing: string };
    const answers = await Promise.all(
      others.map(async (other): Promise<Part> => {
        try {
          if (!other.alive || other.url === null) throw new Error('it is away');
          const answer = await fleetRequest(urlOnNode(other.url, '/api/logs/history', new URLSearchParams({ ...query, node: other.node }).toString()), fleet.fleetKey, {
            signal: AbortSignal.timeout(OTHER_NODE_SEARCH_MS),
          });
          const body = (await boundedJson(answer.body, 2 * ANSWER_LINES_MAX_BYTES)) as { lines?: FleetLine[]; partial?: boolean };
          if (answer.statusCode !== 200 || !Array.isArray(body.lines)) throw new Error(`it answered ${answer.statusCode}`);
          // Another node's answer is input like any other: only lines of the shape this agent answers are merged.
          const lines = body.lines.filter((line: unknown): line is FleetLine => typeof (line as FleetLine | null)?.at === 'string' && typeof (line as FleetLine).line === 'string');
          return { lines, partial: body.partial === true };
        } catch {
          return { missing: other.node };
        }
      }),
    );
    return {
      lines: answers.flatMap((answer) => ('lines' in answer ? answer.lines : [])),
      missing: answers.flatMap((answer) => ('missing' in answer ? [answer.missing] : [])),
      partial: answers.some((answer) => 'partial' in answer && answer.partial),
    };
  }

  // Every bot's history, searched on every node of the fleet, merged by time (docs/api.md §21): the platform only.
  router.get('/api/logs/history', async (ctx) => {
    const query = validateQuery(fleetLogHistoryQuery, ctx.query);
    const since = query.since === undefined ? undefined : Date.parse(query.since);
    const until = query.until === undefined ? undefined : Date.parse(query.until);
    if (since !== undefined && until !== undefined && since >= until) throw new BadRequest('since must be before until');
    const match = lineMatcher(query.q, query.regex);
    await access.platformFor(ctx, messages.platformOnlyLogs);
    if (logHistory === undefined) throw new NotImplemented('this agent keeps no log history: AGENT_LOG_HISTORY is off (docs/api.md §21)');
    const newest = query.order !== 'oldest';
    const limit = query.limit ?? DEFAULT_HISTORY_LINES;
    const q = query.q;
    // Asked by another node's agent: this node's lines alone, never the fleet's again.
    const passedOn = /^Fleet\s/i.test(ctx.get('authorization'));
    const own = () =>
      query.node === undefined || query.node === node
        ? logHistory.store.searchBots(
            // Every bot whose lines this node keeps: those it runs, and those that moved away from it.
            logHistory.store.knownBots(query.user_id),
            {
              since,
              until,
              stream: query.stream as HistoryStream | undefined,
              match,
              mustContain: q,
              order: newest ? 'newest' : 'oldest',
              limit,
              maxBytes: ANSWER_LINES_MAX_BYTES,
              lineBytes: (line) => Buffer.byteLength(JSON.stringify(lineView(line))) + 1,
              budgetMs: SEARCH_BUDGET_MS,
            },
          )
        : Promise.resolve({ lines: [], partial: false });
    const forwarded = Object.fromEntries(Object.entries(ctx.query).filter((entry): entry is [string, string] => typeof entry[1] === 'string' && entry[0] !== 'node'));
    const nobody = { lines: [], missing: [], partial: false };
    const [mine, theirs] = await slots.run(undefined, () =>
      Promise.all([own(), passedOn || query.node === node ? Promise.resolve(nobody) : otherNodesLines(forwarded, query.node)]),
    );
    const merged: FleetLine[] = [...mine.lines.map((line) => ({ bot_id: line.botId, node, ...lineView(line) })), ...theirs.lines];
    merged.sort((a, b) => (newest ? b.at.localeCompare(a.at) : a.at.localeCompare(b.at)));
    const lines: FleetLine[] = [];
    let bytes = 0;
    for (const line of merged.slice(0, limit)) {
      bytes += Buffer.byteLength(JSON.stringify(line)) + 1;
      if (bytes > ANSWER_LINES_MAX_BYTES) break;
      lines.push(line);
    }
    ctx.body = { ok: true, lines, partial: mine.partial || theirs.partial, nodes_missing: theirs.missing };
  });

  /**
   * The other nodes' parts of a bot's search (each its own lines of the bot, from where `cursors` says), for a fleet
   * without a log database: a bot that moved has lines on each node it ran on. A node away, or one that does not
   * answer in time, has no part: its place stays as it was, and `missing` names it.
   */
  async function otherNodesParts(botId: string, query: Record<string, string>, cursors: NodeCursors | undefined): Promise<{ parts: NodePart<LineView>[]; missing: string[] }> {
    if (fleet === undefined) return { parts: [], missing: [] };
    const others = (await fleet.nodes.nodes()).filter((one) => !one.self && (cursors === undefined || cursors[one.node] !== undefined) && cursors?.[one.node] !== null);
    const answers = await Promise.all(
      others.map(async (other): Promise<NodePart<LineView> | { missing: string }> => {
        const from = cursors?.[other.node] ?? '';
        try {
          if (!other.alive || other.url === null) throw new Error('it is away');
          const asked = new URLSearchParams({ ...query, ...(from === '' ? {} : { cursor: from }) });
          const answer = await fleetRequest(urlOnNode(other.url, `/api/bots/${botId}/logs/history`, asked.toString()), fleet.fleetKey, {
            headers: { [OWN_PART]: 'own' },
            signal: AbortSignal.timeout(OTHER_NODE_SEARCH_MS),
          });
          const body = (await boundedJson(answer.body, 2 * ANSWER_LINES_MAX_BYTES)) as { lines?: unknown[]; next?: unknown; partial?: unknown };
          if (answer.statusCode !== 200 || !Array.isArray(body.lines)) throw new Error(`it answered ${answer.statusCode}`);
          // Another node's answer is input like any other: only lines of the shape this agent answers are merged.
          const lines = body.lines.filter((line): line is LineView & { position: string } => {
            const shaped = line as Partial<Record<keyof LineView | 'position', unknown>> | null;
            return (
              typeof shaped?.at === 'string' &&
              typeof shaped.line === 'string' &&
              (shaped.stream === 'stdout' || shaped.stream === 'stderr' || shaped.stream === 'agent') &&
              (shaped.run === null || typeof shaped.run === 'string') &&
              typeof shaped.position === 'string' &&
              POSITION.test(shaped.position)
            );
          });
          const next = typeof body.next === 'string' && POSITION.test(body.next) ? body.next : null;
          const viewOf = ({ at, run, stream, line }: LineView): LineView => ({ at, run, stream, line });
          return { node: other.node, from, next, partial: body.partial === true, lines: lines.map((line) => ({ at: line.at, position: line.position, view: viewOf(line) })) };
        } catch {
          return { missing: other.node };
        }
      }),
    );
    return {
      parts: answers.filter((answer): answer is NodePart<LineView> => 'lines' in answer),
      missing: answers.flatMap((answer) => ('missing' in answer ? [answer.missing] : [])),
    };
  }

  router.get('/api/bots/:bot_id/logs/history', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const query = validateQuery(logHistoryQuery, ctx.query);
    const since = query.since === undefined ? undefined : Date.parse(query.since);
    const until = query.until === undefined ? undefined : Date.parse(query.until);
    if (since !== undefined && until !== undefined && since >= until) throw new BadRequest('since must be before until');
    const match = lineMatcher(query.q, query.regex);
    const nodeCursors = query.cursor !== undefined && isNodeCursor(query.cursor) ? decodeNodeCursors(query.cursor) : undefined;
    if (query.cursor !== undefined && isNodeCursor(query.cursor) && nodeCursors === undefined) throw new BadRequest('cursor must be a `next` a search answered, e.g. 1733479200000-42');
    const caller = await access.readerFor(ctx, botId);
    ctx.state.botId = botId;
    if (logHistory === undefined) throw new NotImplemented('this agent keeps no log history: AGENT_LOG_HISTORY is off (docs/api.md §21)');
    // Another node's agent asking for this node's own lines of a bot that may have moved away from it.
    const ownPart = /^Fleet\s/i.test(ctx.get('authorization')) && ctx.get(OWN_PART) === 'own';
    // A removed bot's history went with it; a bot asking of itself exists.
    if (caller.kind !== 'bot' && !ownPart) await driver.findBot(botId);
    const ownFrom = nodeCursors === undefined ? (query.cursor ?? '') : (nodeCursors[node] ?? null);
    const [at, seq] = (ownFrom ?? '').split('-').map(Number);
    const common = {
      since,
      until,
      run: query.run === undefined ? undefined : Date.parse(query.run),
      stream: query.stream as HistoryStream | undefined,
      order: query.order === 'oldest' ? ('oldest' as const) : ('newest' as const),
      after: ownFrom === null || ownFrom === '' ? undefined : { at: at!, seq: seq! },
      limit: query.limit ?? DEFAULT_HISTORY_LINES,
      maxBytes: ANSWER_LINES_MAX_BYTES,
      lineBytes: (line: StoredLine) => Buffer.byteLength(JSON.stringify(lineView(line))) + 1 + (ownPart ? 48 : 0),
      budgetMs: SEARCH_BUDGET_MS,
    };
    const q = query.q;
    const database = logHistory.databaseUrl;
    const nothing: HistoryPage = { lines: [], next: undefined, partial: false };
    const fromAgent = () => (ownFrom === null ? Promise.resolve(nothing) : logHistory.store.search(botId, { ...common, match, mustContain: q }));
    const searching = caller.kind === 'bot' ? botId : undefined;
    if (ownPart) {
      const page = await slots.run(undefined, fromAgent);
      ctx.body = { ok: true, bot_id: botId, from: 'agent', lines: page.lines.map((line) => ({ ...lineView(line), position: `${line.at}-${line.seq}` })), next: cursorOf(page.next), partial: page.partial };
      return;
    }
    if (database === undefined && fleet !== undefined) {
      // Every node's part at once, each within its budget; merged here by time.
      const forwarded = Object.fromEntries(Object.entries(ctx.query).filter((entry): entry is [string, string] => typeof entry[1] === 'string' && entry[0] !== 'cursor'));
      const [mine, theirs] = await slots.run(searching, () => Promise.all([fromAgent(), otherNodesParts(botId, forwarded, nodeCursors)]));
      const own: NodePart<LineView> = {
        node,
        from: ownFrom ?? '',
        next: ownFrom === null ? null : cursorOf(mine.next),
        partial: mine.partial,
        lines: mine.lines.map((line) => ({ at: new Date(line.at).toISOString(), position: `${line.at}-${line.seq}`, view: lineView(line) })),
      };
      const merged = mergeParts([own, ...theirs.parts], common.order, common.limit, ANSWER_LINES_MAX_BYTES, (view) => Buffer.byteLength(JSON.stringify(view)) + 1);
      // A node that did not answer keeps its place: the next page asks it again.
      const next: Record<string, string | null> = { ...merged.next };
      for (const missing of theirs.missing) next[missing] = nodeCursors?.[missing] ?? '';
      ctx.body = { ok: true, bot_id: botId, from: 'agent', lines: merged.lines, next: encodeNodeCursors(next), partial: merged.partial, nodes_missing: theirs.missing };
      return;
    }
    let from: 'database' | 'agent' = database === undefined ? 'agent' : 'database';
    let page: HistoryPage;
    if (database === undefined) page = await slots.run(searching, fromAgent);
    else {
      try {
        page = await slots.run(searching, () => searchVictoriaLogs(database, botId, { ...common, q, regex: query.regex }));
      } catch (err) {
        // The database away: this agent's own history answers, and says so.
        if (!(err instanceof OperationFailed)) throw err;
        from = 'agent';
        page = await slots.run(searching, fromAgent);
      }
    }
    ctx.body = { ok: true, bot_id: botId, from, lines: page.lines.map(lineView), next: cursorOf(page.next), partial: page.partial };
  });

  return router;
}
