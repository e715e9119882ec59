import Router from '@koa/router';
import { BadRequest, NotImplemented, OperationFailed } from '../errors.js';
import type { LogCollector } from '../log-history/log-collector.js';
import { lineMatcher } from '../log-history/line-match.js';
import type { HistoryPage, HistoryStream, Position, StoredLine } from '../log-history/log-store.js';
import { searchVictoriaLogs } from '../log-history/victorialogs-search.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Access } from './access.js';
import { botIdInPath, DEFAULT_HISTORY_LINES, logHistoryQuery, validateQuery } from './schemas.js';

/** An answer's lines stay within the logs' 4 MiB (docs/api.md §2), the envelope's own fields aside. */
const ANSWER_LINES_MAX_BYTES = 4 * 1024 * 1024 - 4 * 1024;
/** A search past this answers what it found, with `partial` and the place to go on from. */
export const SEARCH_BUDGET_MS = 2_000;

export interface LogHistoryRoutesDeps {
  readonly driver: RuntimeDriver;
  /** Undefined where the agent keeps no history (AGENT_LOG_HISTORY=off): the path answers 501. */
  readonly logHistory: LogCollector | undefined;
  readonly access: Access;
}

/** A line as an answer shows it. */
const lineView = (line: StoredLine) => ({
  at: new Date(line.at).toISOString(),
  run: line.run === null ? null : new Date(line.run).toISOString(),
  stream: line.stream,
  line: line.text,
});

const cursorOf = (position: Position | undefined): string | null => (position === undefined ? null : `${position.at}-${position.seq}`);

/** A bot's log history, searched (docs/api.md §21): the bot itself, or the platform. */
export function logHistoryRoutes({ driver, logHistory, access }: LogHistoryRoutesDeps): Router {
  const router = new Router();

  router.get('/api/bots/:bot_id/logs/history', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const query = validateQuery(logHistoryQuery, ctx.query);
    const since = query.since === undefined ? undefined : Date.parse(query.since);
    const until = query.until === undefined ? undefined : Date.parse(query.until);
    if (since !== undefined && until !== undefined && since >= until) throw new BadRequest('since must be before until');
    const match = lineMatcher(query.q, query.regex);
    const caller = await access.readerFor(ctx, botId);
    ctx.state.botId = botId;
    if (logHistory === undefined) throw new NotImplemented('this agent keeps no log history: AGENT_LOG_HISTORY is off (docs/api.md §21)');
    // A removed bot's history went with it; a bot asking of itself exists.
    if (caller.kind !== 'bot') await driver.findBot(botId);
    const [at, seq] = (query.cursor ?? '').split('-').map(Number);
    const common = {
      since,
      until,
      run: query.run === undefined ? undefined : Date.parse(query.run),
      stream: query.stream as HistoryStream | undefined,
      order: query.order === 'oldest' ? ('oldest' as const) : ('newest' as const),
      after: query.cursor === undefined ? undefined : { at: at!, seq: seq! },
      limit: query.limit ?? DEFAULT_HISTORY_LINES,
      maxBytes: ANSWER_LINES_MAX_BYTES,
      lineBytes: (line: StoredLine) => Buffer.byteLength(JSON.stringify(lineView(line))) + 1,
      budgetMs: SEARCH_BUDGET_MS,
    };
    const q = query.q;
    const database = logHistory.databaseUrl;
    const fromAgent = () => logHistory.store.search(botId, { ...common, match, chunkMay: q === undefined ? undefined : (text) => text.includes(q) });
    let from: 'database' | 'agent' = database === undefined ? 'agent' : 'database';
    let page: HistoryPage;
    if (database === undefined) page = await fromAgent();
    else {
      try {
        page = await searchVictoriaLogs(database, botId, { ...common, q, regex: query.regex });
      } catch (err) {
        // The database away: this agent's own history answers, and says so.
        if (!(err instanceof OperationFailed)) throw err;
        from = 'agent';
        page = await fromAgent();
      }
    }
    ctx.body = { ok: true, bot_id: botId, from, lines: page.lines.map(lineView), next: cursorOf(page.next), partial: page.partial };
  });

  return router;
}
