import { AgentCalls } from './agent-calls.js';
import { BotAgentClient } from './index.js';
import type { BotEvent } from './wire.js';

/** Where the platform's client finds the agent and its admin token. */
export interface PlatformClientOptions {
  /** The agent's address; BOT_AGENT_URL, else PLATFORM_AGENT_URL, else `http://127.0.0.1:8000` (npm start's) unless given. */
  agentUrl?: string;
  /** How long one call may take; 90 s unless given. */
  timeoutMs?: number;
  /** Where the variables are read; process.env unless given. */
  env?: Record<string, string | undefined>;
}

/** A page of GET /api/admin/bots (docs/api.md §2): every bot the query names counted, `next` while more follow. */
export interface BotPage {
  total: number;
  bots: Array<{ bot_id: string; user_id: string | null; state: string; node?: string | null; [field: string]: unknown }>;
  next?: string;
}

/**
 * The platform's side of bot-agent (docs/clients.md): any bot, the list of bots, the fleet's nodes, moves and every
 * bot's events, with the admin token BOT_AGENT_ADMIN_TOKEN (or from the agent's own host, which needs none).
 */
export class PlatformClient extends AgentCalls {
  private constructor(
    agentUrl: string,
    timeoutMs: number,
    adminToken: string | undefined,
    private readonly env: Record<string, string | undefined>,
  ) {
    super(agentUrl, timeoutMs, async () => undefined, adminToken);
  }

  static create(options: PlatformClientOptions = {}): PlatformClient {
    const env = options.env ?? process.env;
    const agentUrl = (options.agentUrl ?? (env.BOT_AGENT_URL || env.PLATFORM_AGENT_URL || 'http://127.0.0.1:8000')).replace(/\/+$/, '');
    return new PlatformClient(agentUrl, options.timeoutMs ?? 90_000, env.BOT_AGENT_ADMIN_TOKEN || undefined, env);
  }

  /** A client of one bot, called as the platform: its owner is read from the agent for stop, start and restart. */
  bot(botId: string): Promise<BotAgentClient> {
    const env = { USER_ID: this.env.USER_ID, BOT_AGENT_ADMIN_TOKEN: this.adminToken };
    return BotAgentClient.create({ agentUrl: this.agentUrl, botId, env, timeoutMs: this.timeoutMs });
  }

  /** The bots, in the order of their ids: a page of at most `limit` after `after`, or all; `userId`'s alone where given. */
  async bots(options: { limit?: number; after?: string; userId?: string } = {}): Promise<BotPage> {
    const query = new URLSearchParams();
    if (options.userId !== undefined) query.set('user_id', options.userId);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.after !== undefined) query.set('after', options.after);
    const { total, bots, next } = await this.call<BotPage>('GET', `/api/admin/bots${query.size > 0 ? `?${query}` : ''}`);
    return { total, bots, ...(next === undefined ? {} : { next }) };
  }

  /** The fleet's nodes, each alive or away with its bots counted (docs/api.md §17). */
  async nodes(): Promise<{ node: string; nodes: Array<Record<string, unknown>> }> {
    const { node, nodes } = await this.call<{ node: string; nodes: Array<Record<string, unknown>> }>('GET', '/api/admin/nodes');
    return { node, nodes };
  }

  /** Moves the bot to node `node` (docs/api.md §17); answers the agent's message once it runs there. */
  async move(botId: string, node: string): Promise<string> {
    return (await this.call<{ message: string }>('POST', `/api/admin/bots/${encodeURIComponent(botId)}/move`, { node })).message;
  }

  /** Every bot's events as they happen, resumed as a bot's are (BotAgentClient.events). */
  events(options: { after?: string; signal?: AbortSignal } = {}): AsyncGenerator<BotEvent> {
    return this.eventsAt('/api/events', options);
  }
}
