import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentCalls, BotAgentError } from './agent-calls.js';
export { BotAgentError } from './agent-calls.js';
export { PlatformClient } from './platform.js';
export type { BotPage, PlatformClientOptions } from './platform.js';
export { STREAM_LINE_MAX, StreamLineTooLong } from './sse.js';
import type { Backup, BotEvent, BotStats, BotStatus, DeployChange, ExitRecord, Revision } from './wire.js';

// The bot's side of bot-agent, with nothing but the platform (fetch, web streams, node:net for the probe):
// Node 18 to 24, Bun and Deno. Finds the agent (docs/api.md §7) and calls it as the bot named by BOT_ID.

export type { Backup, BotEvent, BotStats, BotStatus, DeployChange, ExitRecord, Revision } from './wire.js';

/** One line the bot wrote, as live logs send it (docs/api.md §10). */
export interface LogLine {
  type: 'log';
  line: string;
  stream: 'stdout' | 'stderr';
  at: string;
}

/** How often `beatWhile` beats unless told, and the ttl it asks for: three beats to a ttl (docs/api.md §13). */
const HEARTBEAT_EVERY_MS = 10_000;
const HEARTBEAT_TTL_S = 30;

export interface FindAgentOptions {
  /** Where to probe first; BOT_AGENT_PROBE (`host:port`), else `agent:8000`, unless given. */
  probe?: { host: string; port: number };
  /** How long the probe may take; 1000 ms unless given. */
  probeTimeoutMs?: number;
  /** The agent's external address, the last resort. */
  externalUrl?: string;
  /** Where PLATFORM_AGENT_URL is read; process.env unless given. */
  env?: Record<string, string | undefined>;
}

function canConnect(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (reachable: boolean): void => {
      socket.destroy();
      resolve(reachable);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function probeFrom(value: string | undefined): { host: string; port: number } | undefined {
  const match = value === undefined ? null : /^([^:\s]+):(\d{1,5})$/.exec(value);
  return match ? { host: match[1] ?? '', port: Number(match[2]) } : undefined;
}

/**
 * The agent's address: the internal one when a TCP connection to it opens
 * within the time-out, else PLATFORM_AGENT_URL, else the external address.
 */
export async function findAgent(options: FindAgentOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  const { host, port } = options.probe ?? probeFrom(env.BOT_AGENT_PROBE) ?? { host: 'agent', port: 8000 };
  if (await canConnect(host, port, options.probeTimeoutMs ?? 1_000)) return `http://${host}:${port}`;
  const configured = env.PLATFORM_AGENT_URL;
  if (configured) return configured.replace(/\/+$/, '');
  if (options.externalUrl) return options.externalUrl.replace(/\/+$/, '');
  throw new BotAgentError(
    `no agent at ${host}:${port}, and neither PLATFORM_AGENT_URL nor an external address is set`,
    undefined,
  );
}

export interface BotAgentClientOptions extends FindAgentOptions {
  /** The agent's address; found with findAgent unless given. */
  agentUrl?: string;
  /** The bot called for: the platform names any (PlatformClient.bot); BOT_ID unless given. */
  botId?: string;
  /** How long one call may take; 90 s unless given, as a restart waits for the bot. */
  timeoutMs?: number;
}

/**
 * The bot's token: PLATFORM_AGENT_TOKEN (Docker), else the file PLATFORM_AGENT_TOKEN_FILE names (a
 * Kubernetes pod's projected ServiceAccount token), read at each call since the kubelet renews it.
 */
function tokenOf(env: Record<string, string | undefined>): () => Promise<string | undefined> {
  const token = env.PLATFORM_AGENT_TOKEN || undefined;
  const file = env.PLATFORM_AGENT_TOKEN_FILE;
  if (token !== undefined || !file) return async () => token;
  return async () => {
    try {
      return (await readFile(file, 'utf8')).trim() || undefined;
    } catch (err) {
      throw new BotAgentError(`cannot read the bot's token from ${file} (PLATFORM_AGENT_TOKEN_FILE): ${(err as Error).message}`, undefined);
    }
  };
}

/** Calls the agent as the bot named by BOT_ID (and, for stop, start and restart, its owner USER_ID). */
export class BotAgentClient extends AgentCalls {
  private constructor(
    agentUrl: string,
    readonly botId: string,
    private readonly userId: string | undefined,
    timeoutMs: number,
    token: () => Promise<string | undefined>,
    adminToken: string | undefined,
    /** The platform named the bot (`botId`): its owner is read from the agent where USER_ID is not set. */
    private readonly platformNamed: boolean,
  ) {
    super(agentUrl, timeoutMs, token, adminToken);
  }

  /**
   * A client for this bot; fails clearly when BOT_ID is not set. A bot that holds a token sends it only
   * to an agent it was configured for (docs/api.md §7): `agentUrl`, PLATFORM_AGENT_URL or the probe
   * address BOT_AGENT_PROBE. Such a bot probes no default `agent:8000` (whatever answers there would get
   * no token): without BOT_AGENT_PROBE it calls PLATFORM_AGENT_URL directly.
   */
  static async create(options: BotAgentClientOptions = {}): Promise<BotAgentClient> {
    const env = options.env ?? process.env;
    const botId = options.botId ?? env.BOT_ID;
    if (!botId) throw new BotAgentError('BOT_ID is not set: the agent manages only the bot that names itself', undefined);
    const holdsToken = Boolean(env.PLATFORM_AGENT_TOKEN || env.PLATFORM_AGENT_TOKEN_FILE || env.BOT_AGENT_ADMIN_TOKEN);
    const given = probeFrom(env.BOT_AGENT_PROBE);
    const platformUrl = env.PLATFORM_AGENT_URL ? env.PLATFORM_AGENT_URL.replace(/\/+$/, '') : undefined;
    const direct = options.agentUrl ?? (holdsToken && !given ? platformUrl : undefined);
    const agentUrl = direct ?? (await findAgent(options));
    const configured = [options.agentUrl, platformUrl, given && `http://${given.host}:${given.port}`];
    // Tokens, the bot's and the platform's, go only to an agent the client was configured for.
    const trusted = configured.includes(agentUrl);
    const token = trusted ? tokenOf(env) : async () => undefined;
    const adminToken = (trusted && env.BOT_AGENT_ADMIN_TOKEN) || undefined;
    return new BotAgentClient(agentUrl, botId, env.USER_ID, options.timeoutMs ?? 90_000, token, adminToken, options.botId !== undefined);
  }

  /** Restarts this bot; the answer comes before the restart, which then ends this process. */
  async selfRestart(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/self/restart', undefined, { 'X-Bot-ID': this.botId })).message;
  }

  /**
   * Tells the agent this bot is well (docs/api.md §13); without another beat within `ttlS` (30 unless given,
   * or the bot's own from its creation) it is unhealthy, and the watchdog restarts it after its grace.
   */
  async heartbeat(ttlS?: number): Promise<string> {
    const body = ttlS === undefined ? {} : { ttl_s: ttlS };
    return (await this.call<{ message: string }>('POST', '/api/bots/self/heartbeat', body, { 'X-Bot-ID': this.botId })).message;
  }

  /**
   * Beats every `everyMs` (10 s unless given) while `healthy()` says so (e.g. while the gateway is connected),
   * until `signal` aborts: when it stops saying so, the agent sees the bot go unhealthy `ttlS` later. A beat
   * that fails is tried again at the next tick (and handed to `onError`). Resolves once `signal` aborts.
   */
  async beatWhile(
    healthy: () => boolean | Promise<boolean>,
    { everyMs = HEARTBEAT_EVERY_MS, ttlS = HEARTBEAT_TTL_S, signal, onError }: { everyMs?: number; ttlS?: number; signal?: AbortSignal; onError?: (err: unknown) => void } = {},
  ): Promise<void> {
    while (!signal?.aborted) {
      try {
        if (await healthy()) await this.heartbeat(ttlS);
      } catch (err) {
        onError?.(err);
      }
      await sleep(everyMs, undefined, { signal }).catch(() => undefined);
    }
  }

  async restart(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/restart', await this.owned())).message;
  }

  async stop(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/stop', await this.owned())).message;
  }

  async start(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/start', await this.owned())).message;
  }

  /** The last `lines` lines of this bot's output (100 unless given). */
  async logs(lines?: number): Promise<string> {
    return (await this.call<{ logs: string }>('POST', '/api/bots/logs', { bot_id: this.botId, lines })).logs;
  }

  async stats(): Promise<BotStats> {
    return (await this.call<{ stats: BotStats }>('GET', `${this.botPath}/stats`)).stats;
  }

  /** The bot's state, uptime, crashes in the last hour and its last exit. */
  async status(): Promise<BotStatus> {
    return (await this.call<{ bot: BotStatus }>('GET', this.botPath)).bot;
  }

  /** The bot's exit records, newest first (at most `limit`, 1 to 50; 20 unless given). */
  async exits(limit?: number): Promise<ExitRecord[]> {
    const query = limit === undefined ? '' : `?limit=${encodeURIComponent(limit)}`;
    return (await this.call<{ exits: ExitRecord[] }>('GET', `${this.botPath}/exits${query}`)).exits;
  }

  /**
   * The last `lines` lines (100 unless given), then each new one as the bot
   * writes it, with an `exited` event where a run ends, across restarts. Ends
   * when `signal` aborts or the agent closes the stream.
   */
  async *followLogs(options: { lines?: number; signal?: AbortSignal } = {}): AsyncGenerator<LogLine | BotEvent> {
    const lines = options.lines === undefined ? '' : `&lines=${encodeURIComponent(options.lines)}`;
    for await (const message of this.stream(`${this.botPath}/logs?follow=true${lines}`, {}, options.signal)) {
      const data = JSON.parse(message.data) as Record<string, unknown>;
      yield (message.event === 'log' ? { type: 'log', ...data } : data) as LogLine | BotEvent;
    }
  }

  /**
   * The bot's events as they happen; with `after` (an event's id), first every
   * kept event after it. A lost connection is opened again, resuming after the
   * last event received, so none is missed. Ends when `signal` aborts.
   */
  events(options: { after?: string; signal?: AbortSignal } = {}): AsyncGenerator<BotEvent> {
    return this.eventsAt(`${this.botPath}/events`, options);
  }

  /** The bot's revisions, newest first (docs/api.md §15). */
  async revisions(): Promise<Revision[]> {
    return (await this.call<{ revisions: Revision[] }>('GET', `${this.botPath}/revisions`)).revisions;
  }

  /**
   * Deploys a new revision of the bot (the platform's: from the host, or with BOT_AGENT_ADMIN_TOKEN); answers
   * its number once its run is started. It is judged after: see revisions(), or waitForRevision().
   */
  async deploy(change: DeployChange = {}): Promise<number> {
    return (await this.call<{ revision: number }>('PATCH', `/api/admin/bots/${encodeURIComponent(this.botId)}`, change)).revision;
  }

  /** Back to the previous revision (the platform's, as deploy); answers the revision that runs now. */
  async rollback(): Promise<number> {
    return (await this.call<{ revision: number }>('POST', `/api/admin/bots/${encodeURIComponent(this.botId)}/rollback`)).revision;
  }

  /**
   * A backup of the bot's data folders now, `stop`, `live` or `pre` (`pre`: the command run in the bot first, then copied
   * live), copied to `stores` (docs/api.md §20; the platform's, as deploy).
   */
  async backup(mode: 'stop' | 'live' | 'pre' = 'stop', stores?: readonly string[], pre?: readonly string[]): Promise<Backup> {
    return (await this.call<{ backup: Backup }>('POST', `${this.adminPath}/backups`, { mode, ...(stores && stores.length > 0 ? { stores } : {}), ...(pre ? { pre } : {}) })).backup;
  }

  /** The bot's backups, newest first: the agent's folder's, or the store's named. */
  async backups(store?: string): Promise<Backup[]> {
    return (await this.call<{ backups: Backup[] }>('GET', `${this.adminPath}/backups${storeQuery(store)}`)).backups;
  }

  /** Restores the backup into the bot (its data as it was kept as a backup first); answers the agent's message. */
  async restore(backupId: string, store?: string): Promise<string> {
    return (await this.call<{ message: string }>('POST', `${this.adminPath}/backups/${encodeURIComponent(backupId)}/restore${storeQuery(store)}`)).message;
  }

  /** Verifies the backup (unpacked beside the bot and read back); answers it with its verification. */
  async verify(backupId: string, store?: string): Promise<Backup> {
    return (await this.call<{ backup: Backup }>('POST', `${this.adminPath}/backups/${encodeURIComponent(backupId)}/verify${storeQuery(store)}`)).backup;
  }

  private get adminPath(): string {
    return `/api/admin/bots/${encodeURIComponent(this.botId)}`;
  }

  /** The revision once it is judged (its outcome no longer `deploying`), asking every `everyMs` (1 s) until `signal` aborts. */
  async waitForRevision(revision: number, { everyMs = 1_000, signal }: { everyMs?: number; signal?: AbortSignal } = {}): Promise<Revision> {
    for (;;) {
      const found = (await this.revisions()).find((r) => r.revision === revision);
      if (found && found.outcome !== 'deploying') return found;
      await sleep(everyMs, undefined, { signal });
    }
  }

  private get botPath(): string {
    return `/api/bots/${encodeURIComponent(this.botId)}`;
  }

  /** The bot and its owner, as stop, start and restart name them: USER_ID, else (the platform's) the owner the agent knows. */
  private async owned(): Promise<{ bot_id: string; user_id: string }> {
    const userId = this.userId || (this.platformNamed ? (await this.status()).user_id : null);
    if (!userId) throw new BotAgentError('USER_ID is not set: stop, start and restart name the owner', undefined);
    return { bot_id: this.botId, user_id: userId };
  }
}

function storeQuery(store: string | undefined): string {
  return store === undefined ? '' : `?store=${encodeURIComponent(store)}`;
}
