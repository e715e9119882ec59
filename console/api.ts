import type { BotStatus, ExitRecord } from '../clients/typescript/src/wire.js';

/** A refusal or failure of the agent, with its status and its own words. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Calls the agent's API from the page: same origin, the session cookie (if any) goes along. */
export async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const response = await fetch(path, {
    method: init.method ?? 'GET',
    credentials: 'same-origin',
    headers: init.body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const answer = (await response.json().catch(() => ({ ok: false, msg: `${response.status} ${response.statusText}` }))) as T & { ok: boolean; msg?: string };
  if (!response.ok || !answer.ok) throw new ApiError(response.status, answer.msg ?? `${response.status}`);
  return answer;
}

/** What a refused operation means, in plain words. */
export function plainWords(err: unknown): string {
  if (!(err instanceof ApiError)) return `The agent could not be reached: ${String((err as Error)?.message ?? err)}`;
  if (err.status === 429) return `Too many operations on this bot just now: wait a minute and try again. (${err.message})`;
  if (err.status === 409) return `The bot is busy or not in a state for this: ${err.message}`;
  if (err.status === 403) return `Not allowed: ${err.message}`;
  if (err.status === 504) return `It is taking longer than the agent waits; it goes on: ${err.message}`;
  return err.message;
}

export type { Backup, BotEvent, BotStatus, DataFolderUse, ExitRecord, Health, Revision } from '../clients/typescript/src/wire.js';

/** A bot as the console's table shows it (GET /api/console/fleet). */
export type FleetBot = Omit<BotStatus, 'last_exit' | 'data'> & {
  template: string | null;
  /** The image it runs, as asked for, and its revision; null on the rows of a node away (older agents say neither). */
  image?: string | null;
  revision?: number | null;
  /** Its next scheduled run and that run's first action (docs/api.md §18); older agents of a fleet say none. */
  next_schedule?: { at: string; action: string } | null;
  restarts_last_hour: number;
  last_exit: ExitSummary | null;
  sparkline: { cpu_percent: number[]; memory_bytes: number[] };
  /** On the rows of a node away: the bot as its agent last said, at this time. */
  last_known?: string;
};

/** An exit record without its lines, as the table carries it. */
export type ExitSummary = Omit<ExitRecord, 'logs'>;

/** How a run ended, in a few words. */
export function exitReason(exit: ExitSummary | null): string {
  if (!exit) return '—';
  const parts = [exit.exit_code === null ? 'no code' : `code ${exit.exit_code}`];
  if (exit.signal) parts.push(exit.signal);
  if (exit.oom_killed) parts.push('out of memory');
  parts.push(exit.unhealthy ? `restarted unhealthy (${exit.unhealthy.check})` : exit.requested ? 'asked for' : 'crashed');
  return parts.join(', ');
}

export const megabytes = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** A time as the operator's clock shows it. */
export const clock = (iso: string): string => new Date(iso).toLocaleString();

/** What the owner may do to a bot's run (docs/api.md §3). */
export type Operation = 'restart' | 'stop' | 'start';

/** What each operation does, as the question before it says. */
export const OPERATION_WORDS: Readonly<Record<Operation, string>> = {
  restart: 'The bot stops and starts again.',
  stop: 'The bot stops until it is started again.',
  start: 'The bot starts.',
};

/** Restarts, stops or starts the bot as its owner; answers the agent's message. */
export async function operate(botId: string, userId: string | null, operation: Operation): Promise<string> {
  const { message } = await api<{ message: string }>(`/api/bots/${operation}`, { method: 'POST', body: { bot_id: botId, user_id: userId ?? '' } });
  return message;
}
