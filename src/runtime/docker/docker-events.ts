import type Docker from 'dockerode';
import type { FaultReporter } from '../driver.js';
import { signalled } from './docker-signals.js';
import type { EngineStream } from './docker-signals.js';
import { eachJsonLine } from './json-lines.js';

/** One event of the engine's stream, as far as the agent reads it. */
export interface EngineEvent {
  Type?: string;
  Action?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
  /** When it happened, in nanoseconds since the epoch. */
  timeNano?: number;
}

const RECONNECT_MS = 1_000;
/** The event stream is silent while nothing happens: a ping this often tells a quiet engine from a stalled one. */
const WATCHDOG_MS = 10_000;
/** How long subscribing or a watchdog ping may take. */
const DEADLINE_MS = 1_500;

/** What the stream's owner does as it opens, carries events and is lost. */
export interface EventStreamHandlers {
  /** Each event, before any listener has it (what throws here is reported as the owner's). */
  event(event: EngineEvent): void;
  /** The stream is open (again): list what it will keep current; resolves once listed. */
  opened(): Promise<void>;
  /** The stream, or the listing after it opened, was lost: nothing is current until it opens again. */
  lost(): void;
}

/**
 * The engine's event stream of containers and networks, kept open: subscribed
 * before the owner lists (so that no change falls between the two), judged by
 * a ping while quiet (a stalled engine sends no events and no end), and opened
 * again a second after any loss, replaying what the engine still holds since
 * the newest event seen. Listeners get every event in order; a listener that
 * throws is reported, and the others still get it.
 */
export class DockerEventStream {
  private readonly listeners: Array<(event: EngineEvent) => void> = [];
  private events: EngineStream | undefined;
  private current = false;
  /** Whether the loss of the stream was reported and it has not come back since. */
  private failing = false;
  private started = false;
  private closed = false;
  private reconnect: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  /** Counts subscriptions: one that a newer one replaced is dropped when it comes back. */
  private attempts = 0;
  /** The time of the newest event seen (ns), so that a new subscription replays what it missed. */
  private lastEventNano: number | undefined;
  /** When the stream was last known to work (the agent's clock): an event came, or a ping was answered. */
  private aliveAtMs: number | undefined;
  /** When it was last known to work before it was lost, while it has not been open again since. */
  private lostAfterMs: number | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly report: FaultReporter,
    private readonly handlers: EventStreamHandlers,
  ) {}

  /** Whether the stream is open and its owner's listing done. */
  get open(): boolean {
    return this.current;
  }

  /**
   * While the stream is opened again after a loss: when it was last known to work before it. Its replay
   * may not reach back that far (the engine keeps its last 256 events or so). Undefined at its first opening.
   */
  get downSinceMs(): number | undefined {
    return this.lostAfterMs;
  }

  /**
   * Hands every event to `listener` from now on, and those since `since`
   * that the engine still holds (it keeps its last 256 or so), when the
   * stream has not started yet. After a loss, a new subscription replays
   * what came in between to the listeners.
   */
  listen(listener: (event: EngineEvent) => void, since: Date | undefined): void {
    this.listeners.push(listener);
    if (since === undefined) return;
    const sinceNano = since.getTime() * 1e6;
    if (!this.started) {
      this.lastEventNano = sinceNano;
      return;
    }
    // Opened before this listener came (a caller was identified first): events between `since` and now
    // would never reach it. The stream is opened again from `since`, and what it replays is listed again.
    this.lastEventNano = Math.min(this.lastEventNano ?? sinceNano, sinceNano);
    this.reopen();
  }

  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.subscribe();
    this.watchdog = setInterval(() => void this.check(), WATCHDOG_MS).unref();
  }

  close(): void {
    this.closed = true;
    this.current = false;
    clearTimeout(this.reconnect);
    clearInterval(this.watchdog);
    this.events?.destroy?.();
  }

  private async check(): Promise<void> {
    if (!this.current) return;
    try {
      await signalled(this.docker).ping({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      if (this.current) this.aliveAtMs = Date.now();
    } catch (err) {
      this.lost(this.events, err);
    }
  }

  /** Drops the stream, and any subscription under way, and subscribes again at once. */
  private reopen(): void {
    const events = this.events;
    this.events = undefined;
    this.lostAfterMs ??= this.aliveAtMs;
    this.current = false;
    events?.destroy?.();
    this.handlers.lost();
    clearTimeout(this.reconnect);
    this.reconnect = undefined;
    void this.subscribe();
  }

  private async subscribe(): Promise<void> {
    const attempt = ++this.attempts;
    try {
      // A deadline on the subscribing only: the signal must not end the stream later.
      const subscribing = new AbortController();
      const deadline = setTimeout(() => subscribing.abort(), DEADLINE_MS);
      const since = this.listeners.length > 0 && this.lastEventNano !== undefined ? sinceParameter(this.lastEventNano) : undefined;
      const events = await signalled(this.docker)
        .getEvents({ filters: { type: ['container', 'network'] }, since, abortSignal: subscribing.signal })
        .finally(() => clearTimeout(deadline));
      if (attempt !== this.attempts || this.closed) {
        // A newer subscription took its place meanwhile.
        events.destroy?.();
        return;
      }
      this.events = events;
      eachJsonLine<EngineEvent>(
        events,
        (event) => this.deliver(event),
        (err) => this.report('an engine event the identity index could not handle', err),
      );
      const lost = (err?: unknown): void => this.lost(events, err ?? new Error('the engine ended its event stream'));
      events.on('end', lost);
      events.on('close', lost);
      events.on('error', lost);
      await this.handlers.opened();
      if (this.events === events) {
        this.current = true;
        this.failing = false;
        this.aliveAtMs = Date.now();
        this.lostAfterMs = undefined;
      }
    } catch (err) {
      if (attempt === this.attempts) this.lost(this.events, err);
    }
  }

  private deliver(event: EngineEvent): void {
    if (event.timeNano !== undefined) this.lastEventNano = Math.max(this.lastEventNano ?? 0, event.timeNano);
    if (this.current) this.aliveAtMs = Date.now();
    // The owner first, so that a listener's look-up of a start shares the owner's inspection.
    this.handlers.event(event);
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.report('an engine event a run watcher could not handle', err);
      }
    }
  }

  /** Drops the stream and reconnects; reported once until it is open again. */
  private lost(events: EngineStream | undefined, err: unknown): void {
    if (events !== this.events && events !== undefined) return;
    if (!this.failing && !this.closed) {
      this.failing = true;
      this.report('the identity index lost the engine event stream; it reconnects every second', err);
    }
    this.lostAfterMs ??= this.aliveAtMs;
    this.current = false;
    this.events = undefined;
    events?.destroy?.();
    this.handlers.lost();
    if (this.closed || this.reconnect) return;
    this.reconnect = setTimeout(() => {
      this.reconnect = undefined;
      void this.subscribe();
    }, RECONNECT_MS).unref();
  }
}

/** The engine's `since`: seconds and nanoseconds since the epoch. */
function sinceParameter(timeNano: number): string {
  const seconds = Math.floor(timeNano / 1e9);
  return `${seconds}.${String(Math.round(timeNano - seconds * 1e9)).padStart(9, '0')}`;
}
