import { setTimeout as sleep } from 'node:timers/promises';
import { streamMessages } from './sse.js';
import type { StreamMessage } from './sse.js';
import type { BotEvent } from './wire.js';

// How the clients call the agent (docs/api.md §7): one envelope, calls that wait out an agent being replaced,
// event streams that resume where they broke off. A bot's client and the platform's stand on it.

/** The agent sends ': ping' at least every 15 s; this long without a byte means the connection is gone. */
const STREAM_SILENCE_MS = 45_000;
/** Reconnection delays of an event stream: from 1 s, doubling, to at most 30 s. */
const RECONNECT_FIRST_MS = 1_000;
const RECONNECT_MAX_MS = 30_000;
/**
 * While one agent replaces another, a connection may be refused, or get neither an answer nor a refusal
 * (docs/api.md §7): a call whose connection never opened (refused at once, or given up by the platform's
 * fetch, Node's after 10 s) tries again, from 250 ms apart doubling to 2 s, for up to 60 s within its own
 * deadline (one agent replaced under the chart's Recreate was away 21 s once: docs/operating.md). Only a
 * connection that never opened is tried again: no request is sent twice.
 */
const CONNECT_RETRY_FIRST_MS = 250;
const CONNECT_RETRY_MAX_MS = 2_000;
/** How long a call keeps trying to connect at most, within its deadline: a replacement takes seconds, an agent that is gone does not come back. */
const CONNECT_RETRY_FOR_MS = 60_000;
/** Failures of opening a connection that a moment may mend. */
const NOT_CONNECTED = new Set(['UND_ERR_CONNECT_TIMEOUT', 'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

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

/** A connection to one agent: its address, how long a call may take, and who calls (a bot's token, or the platform's). */
export class AgentCalls {
  constructor(
    readonly agentUrl: string,
    protected readonly timeoutMs: number,
    /** The bot's token, sent as `Authorization: Bot <token>` where the agent names bots by token (docs/api.md §4). */
    private readonly token: () => Promise<string | undefined>,
    /** The platform's admin token (BOT_AGENT_ADMIN_TOKEN): when set, every call is the platform's, sent as `Authorization: Bearer`. */
    protected readonly adminToken: string | undefined,
  ) {}

  /**
   * The events of the stream at `path` as they happen; with `after` (an event's id), first every kept event
   * after it. A lost connection is opened again, resuming after the last event received, so none is missed.
   * Ends when `signal` aborts.
   */
  protected async *eventsAt(path: string, options: { after?: string; signal?: AbortSignal }): AsyncGenerator<BotEvent> {
    let after = options.after;
    let delayMs = RECONNECT_FIRST_MS;
    let opened = false;
    for (;;) {
      try {
        const headers: Record<string, string> = after === undefined ? {} : { 'Last-Event-ID': after };
        for await (const message of this.stream(path, headers, options.signal, () => (opened = true))) {
          delayMs = RECONNECT_FIRST_MS;
          after = message.id ?? after;
          yield JSON.parse(message.data) as BotEvent;
        }
      } catch (err) {
        // Refusals, and failures before the stream ever opened, are the caller's to see.
        const refused = err instanceof BotAgentError && err.status !== undefined && err.status < 500;
        if (options.signal?.aborted || refused || !opened) throw err;
      }
      if (options.signal?.aborted) return;
      try {
        await sleep(delayMs, undefined, { signal: options.signal });
      } catch {
        return;
      }
      delayMs = Math.min(delayMs * 2, RECONNECT_MAX_MS);
    }
  }

  protected async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const reply = await this.send(path, Date.now() + this.timeoutMs, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    return envelopeOf<T>(reply);
  }

  /** The events of an event stream, ended quietly when `signal` aborts. */
  protected async *stream(
    path: string,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    onOpen?: () => void,
  ): AsyncGenerator<StreamMessage> {
    // One controller ends the request: the caller's signal, no answer within the
    // call's time-out, or a connection silent for longer than the agent's pings allow.
    const controller = new AbortController();
    const abort = (): void => controller.abort();
    const giveUp = (ms: number) => () => controller.abort(new Error(`nothing heard for ${ms / 1000} s`));
    signal?.addEventListener('abort', abort, { once: true });
    let silence = setTimeout(giveUp(this.timeoutMs), this.timeoutMs);
    const heard = (): void => {
      clearTimeout(silence);
      silence = setTimeout(giveUp(STREAM_SILENCE_MS), STREAM_SILENCE_MS);
    };
    try {
      const reply = await this.send(path, Date.now() + this.timeoutMs, { headers: { ...headers, Accept: 'text/event-stream' }, signal: controller.signal });
      if (!reply.headers.get('content-type')?.startsWith('text/event-stream') || !reply.body) {
        await envelopeOf(reply);
        throw new BotAgentError('the agent answered without an event stream', reply.status);
      }
      onOpen?.();
      heard();
      for await (const message of streamMessages(reply.body, heard)) {
        heard();
        yield message;
      }
    } catch (err) {
      if (signal?.aborted) return;
      if (err instanceof BotAgentError) throw err;
      throw new BotAgentError(`the agent's stream at ${this.agentUrl} broke off (${(err as Error).message})`, undefined);
    } finally {
      clearTimeout(silence);
      signal?.removeEventListener('abort', abort);
      controller.abort();
    }
  }

  /** Sends the request, trying again until `deadlineMs` while no connection could be opened. */
  private async send(path: string, deadlineMs: number, init: RequestInit): Promise<Response> {
    const given = init.headers as Record<string, string>;
    const token = this.adminToken === undefined ? await this.token() : undefined;
    const authorization = this.adminToken !== undefined ? `Bearer ${this.adminToken}` : token !== undefined ? `Bot ${token}` : undefined;
    const headers = authorization === undefined ? given : { ...given, Authorization: authorization };
    const retryUntil = Math.min(deadlineMs, Date.now() + CONNECT_RETRY_FOR_MS);
    for (let pauseMs = CONNECT_RETRY_FIRST_MS; ; pauseMs = Math.min(pauseMs * 2, CONNECT_RETRY_MAX_MS)) {
      try {
        return await fetch(`${this.agentUrl}${path}`, { ...init, headers });
      } catch (err) {
        const code = ((err as Error).cause as { code?: string } | undefined)?.code;
        const again = code !== undefined && NOT_CONNECTED.has(code) && !init.signal?.aborted && Date.now() + pauseMs < retryUntil;
        if (!again) throw unreachable(this.agentUrl, err);
        await sleep(pauseMs, undefined, { signal: init.signal ?? undefined }).catch(() => undefined);
      }
    }
  }
}

function unreachable(agentUrl: string, err: unknown): BotAgentError {
  const cause = (err as Error).cause as Error | undefined;
  return new BotAgentError(
    `cannot reach the agent at ${agentUrl} (${cause?.message ?? (err as Error).message}): check that the agent is running, ` +
      "the address used, and that this container is on the agent's network",
    undefined,
  );
}

/** The answer's envelope when it says ok, else its `msg` and status as the one error type. */
async function envelopeOf<T>(reply: Response): Promise<T> {
  const answer = (await reply.json().catch(() => ({}))) as { ok?: boolean; msg?: string } & T;
  if (!reply.ok || answer.ok !== true) throw new BotAgentError(answer.msg ?? `HTTP ${reply.status}`, reply.status);
  return answer;
}
