import { connect } from 'node:net';

// The bot's side of bot-agent, with nothing beyond Node itself: find the agent
// (CONTRACT.md §7) and call it as the bot named by BOT_ID.

/** What the agent's stats answer holds. */
export interface BotStats {
  cpu_percent: number;
  memory_usage: string;
  memory_percent: number;
  uptime: string;
}

/** A failed call: the agent's `msg` and HTTP status, or no status when the agent could not be reached. */
export class BotAgentError extends Error {
  constructor(
    readonly msg: string,
    readonly status: number | undefined,
  ) {
    super(status === undefined ? msg : `${status}: ${msg}`);
    this.name = 'BotAgentError';
  }
}

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
  /** How long one call may take; 90 s unless given, as a restart waits for the bot. */
  timeoutMs?: number;
}

/** Calls the agent as the bot named by BOT_ID (and, for stop, start and restart, its owner USER_ID). */
export class BotAgentClient {
  private constructor(
    readonly agentUrl: string,
    readonly botId: string,
    private readonly userId: string | undefined,
    private readonly timeoutMs: number,
  ) {}

  /** A client for this bot; fails clearly when BOT_ID is not set. */
  static async create(options: BotAgentClientOptions = {}): Promise<BotAgentClient> {
    const env = options.env ?? process.env;
    const botId = env.BOT_ID;
    if (!botId) throw new BotAgentError('BOT_ID is not set: the agent manages only the bot that names itself', undefined);
    const agentUrl = options.agentUrl ?? (await findAgent(options));
    return new BotAgentClient(agentUrl, botId, env.USER_ID, options.timeoutMs ?? 90_000);
  }

  /** Restarts this bot; the answer comes before the restart, which then ends this process. */
  async selfRestart(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/self/restart', undefined, { 'X-Bot-ID': this.botId })).message;
  }

  async restart(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/restart', this.owned())).message;
  }

  async stop(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/stop', this.owned())).message;
  }

  async start(): Promise<string> {
    return (await this.call<{ message: string }>('POST', '/api/bots/start', this.owned())).message;
  }

  /** The last `lines` lines of this bot's output (100 unless given). */
  async logs(lines?: number): Promise<string> {
    return (await this.call<{ logs: string }>('POST', '/api/bots/logs', { bot_id: this.botId, lines })).logs;
  }

  async stats(): Promise<BotStats> {
    return (await this.call<{ stats: BotStats }>('GET', `/api/bots/${encodeURIComponent(this.botId)}/stats`)).stats;
  }

  private owned(): { bot_id: string; user_id: string } {
    if (!this.userId) throw new BotAgentError('USER_ID is not set: stop, start and restart name the owner', undefined);
    return { bot_id: this.botId, user_id: this.userId };
  }

  private async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    let reply: Response;
    try {
      reply = await fetch(`${this.agentUrl}${path}`, {
        method,
        headers: { ...headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new BotAgentError(
        `cannot reach the agent at ${this.agentUrl} (${(err as Error).message}): check that the agent is running, ` +
          "the address used, and that this container is on the agent's network",
        undefined,
      );
    }
    const answer = (await reply.json().catch(() => ({}))) as { ok?: boolean; msg?: string } & T;
    if (!reply.ok || answer.ok !== true) throw new BotAgentError(answer.msg ?? `HTTP ${reply.status}`, reply.status);
    return answer;
  }
}
