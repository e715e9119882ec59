import type Docker from 'dockerode';
import type { ContainerInfo, ContainerInspectInfo } from 'dockerode';
import type { FaultReporter } from '../driver.js';
import { BOT_LABEL } from '../labels.js';
import { engineStatus } from './docker-errors.js';
import { signalled } from './docker-signals.js';
import type { EngineStream } from './docker-signals.js';
import { eachJsonLine } from './json-lines.js';

/** A labelled container as the index knows it. */
export interface IndexedBot {
  readonly containerId: string;
  readonly botId: string;
  readonly running: boolean;
  readonly addresses: readonly string[];
  /** Whether the container has a TTY (so its logs carry no stream framing). */
  readonly tty: boolean;
  /** When the current run started, for a running container (parsed once here, not on every read of its stats). */
  readonly startedAt: Date | undefined;
}

/** One event of the engine's stream, as far as the agent reads it. */
export interface EngineEvent {
  Type?: string;
  Action?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
  /** When it happened, in nanoseconds since the epoch. */
  timeNano?: number;
}

/** Container events after which a container no longer holds its addresses. */
const GONE = new Set(['die', 'kill', 'stop', 'destroy', 'pause']);
/** Container events that change what the index holds of a container (exec, attach, health and the like do not). */
const CHANGES = new Set([...GONE, 'create', 'start', 'restart', 'unpause', 'rename', 'update']);
const RECONNECT_MS = 1_000;
/** An inspection that failed other than with a 404 is tried again after this, doubled on each failure up to RETRY_MAX_MS. */
const RETRY_MS = 500;
const RETRY_MAX_MS = 10_000;
/** The event stream is silent while nothing happens: a ping this often tells a quiet engine from a stalled one. */
const WATCHDOG_MS = 10_000;
/** How long subscribing or a watchdog ping may take. */
const DEADLINE_MS = 1_500;
/**
 * How long listing the bots, or inspecting one, may take: no caller waits for it, and the engine
 * is slow when many containers start at once (it answers an inspection once the start is done);
 * a thousand bots listed on a busy host outlast a caller's deadline.
 */
const BACKGROUND_DEADLINE_MS = 10_000;
/** How many containers the index inspects at once, the queue after events and a whole listing together. */
const INSPECT_AT_ONCE = 16;

/**
 * Which bot holds which address, and which container is which bot, kept
 * current from the engine's event stream, so that identifying a caller costs
 * no engine call. The index is listed whole when the stream (re)connects; after
 * that each event that changes a container has that one container inspected,
 * so a burst of events never re-lists every container: its inspections wait
 * in a queue, INSPECT_AT_ONCE at a time, one per container however many events
 * name it, and one that fails is tried again with a growing delay. While the
 * stream is down (and before it first comes up) nothing is answered from the index.
 */
export class DockerBotIndex {
  private byAddress = new Map<string, IndexedBot>();
  private byBotId = new Map<string, IndexedBot>();
  private byContainer = new Map<string, IndexedBot>();
  /** What the inspection after a container's latest event will say, which the run watcher shares. */
  private readonly inspections = new Map<string, PromiseWithResolvers<ContainerInspectInfo | undefined>>();
  /** Containers to inspect after an event, oldest first; one named again while it is inspected is inspected again after. */
  private readonly waiting = new Set<string>();
  private readonly inspecting = new Set<string>();
  /**
   * Inspections under way at the engine, of the queue and of a listing together: a list after a lost stream
   * starts while the queue's inspections are still out, and a slow engine must not get both at once.
   */
  private inspectionsUnderWay = 0;
  /** A listing's inspectors waiting for a slot; they go before the queue (the list is what the index waits for). */
  private readonly listingWaiters: Array<() => void> = [];
  /** Per container, how often its inspection after an event has failed in a row. */
  private readonly failures = new Map<string, number>();
  /** Counts losses of the event stream: an inspection begun before one is not filed (the list after it is newer). */
  private generation = 0;
  private live = false;
  /** Whether the loss of the stream was reported and it has not come back since. */
  private failing = false;
  private started = false;
  private closed = false;
  private events: EngineStream | undefined;
  /** Set while the index is listed whole. */
  private listing = false;
  /** Containers an event named while the index was listed whole: the list may predate the event, so each is inspected after it. */
  private changedWhileListing = new Set<string>();
  /** Containers that started since the last rebuild, whose start time must be read again. */
  private startedSince = new Set<string>();
  private reconnect: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private readonly listeners: Array<(event: EngineEvent) => void> = [];
  /** The time of the newest event seen (ns), so that a new subscription replays what it missed. */
  private lastEventNano: number | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly report: FaultReporter = () => {},
  ) {}

  /** The running bot holding `address`, or undefined; null when the index cannot answer. */
  botAt(address: string): IndexedBot | undefined | null {
    this.start();
    return this.live ? this.byAddress.get(address) : null;
  }

  /** How many bots the index holds; 0 while it cannot answer. */
  size(): number {
    return this.live ? this.byBotId.size : 0;
  }

  /** The labelled container of `botId`, or undefined; null when the index cannot answer. */
  bot(botId: string): IndexedBot | undefined | null {
    this.start();
    return this.live ? this.byBotId.get(botId) : null;
  }

  /**
   * Hands every container event to `listener` from now on, and those since
   * `since` that the engine still holds (it keeps its last 256 or so). After a
   * lost stream, the new subscription replays what came in between.
   */
  watch(listener: (event: EngineEvent) => void, since: Date | undefined): void {
    this.listeners.push(listener);
    if (since && !this.started) this.lastEventNano = since.getTime() * 1e6;
    this.start();
  }

  close(): void {
    this.closed = true;
    this.live = false;
    clearTimeout(this.reconnect);
    clearInterval(this.watchdog);
    this.events?.destroy?.();
    this.forgetQueue();
  }

  private start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.subscribe();
    this.watchdog = setInterval(() => void this.check(), WATCHDOG_MS).unref();
  }

  /** A stalled engine sends no events and no end: judge it by a ping. */
  private async check(): Promise<void> {
    if (!this.live) return;
    try {
      await signalled(this.docker).ping({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    } catch (err) {
      this.lost(this.events, err);
    }
  }

  private async subscribe(): Promise<void> {
    try {
      // Subscribe before listing, so that no change falls between the two.
      // A deadline on the subscribing only: the signal must not end the stream later.
      const subscribing = new AbortController();
      const deadline = setTimeout(() => subscribing.abort(), DEADLINE_MS);
      const since = this.listeners.length > 0 && this.lastEventNano !== undefined ? sinceParameter(this.lastEventNano) : undefined;
      const events = await signalled(this.docker)
        .getEvents({ filters: { type: ['container', 'network'] }, since, abortSignal: subscribing.signal })
        .finally(() => clearTimeout(deadline));
      this.events = events;
      eachJsonLine<EngineEvent>(
        events,
        (event) => this.onEvent(event),
        (err) => this.report('an engine event the identity index could not handle', err),
      );
      const lost = (err?: unknown): void => this.lost(events, err ?? new Error('the engine ended its event stream'));
      events.on('end', lost);
      events.on('close', lost);
      events.on('error', lost);
      await this.rebuild();
      if (this.events === events) {
        this.live = true;
        this.failing = false;
      }
    } catch (err) {
      this.lost(this.events, err);
    }
  }

  /** Drops the event stream and reconnects; reported once until the index is live again. */
  private lost(events: DockerBotIndex['events'], err: unknown): void {
    if (events !== this.events && events !== undefined) return;
    if (!this.failing && !this.closed) {
      this.failing = true;
      this.report('the identity index lost the engine event stream; it reconnects every second', err);
    }
    this.live = false;
    this.events = undefined;
    events?.destroy?.();
    this.forgetQueue();
    if (this.closed || this.reconnect) return;
    this.reconnect = setTimeout(() => {
      this.reconnect = undefined;
      void this.subscribe();
    }, RECONNECT_MS).unref();
  }

  /**
   * The container as the engine describes it now: the inspection an event of it started, when one
   * is under way (so that a start is inspected once), else a new one; undefined when it cannot be had.
   */
  inspect(containerId: string): Promise<ContainerInspectInfo | undefined> {
    return (
      this.inspections.get(containerId)?.promise ??
      this.docker
        .getContainer(containerId)
        .inspect({ abortSignal: AbortSignal.timeout(BACKGROUND_DEADLINE_MS) })
        .catch(() => undefined)
    );
  }

  private onEvent(event: EngineEvent): void {
    if (event.timeNano !== undefined) this.lastEventNano = Math.max(this.lastEventNano ?? 0, event.timeNano);
    // The index first, so that the run watcher's look-up of a start shares the index's inspection.
    this.take(event);
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.report('an engine event a run watcher could not handle', err);
      }
    }
  }

  private take(event: EngineEvent): void {
    const containerId = event.Type === 'network' ? event.Actor?.Attributes?.container : event.Actor?.ID;
    const action = event.Action ?? '';
    // Containers without the bot label are no bots; a network event matters only for a container the index holds.
    const changes =
      event.Type === 'container'
        ? CHANGES.has(action) && event.Actor?.Attributes?.[BOT_LABEL] !== undefined
        : (action === 'connect' || action === 'disconnect') && containerId !== undefined && this.byContainer.has(containerId);
    if (!containerId || !changes) return;
    if (event.Type === 'container' && action === 'start') this.startedSince.add(containerId);
    // A container that stops gives up its addresses at once, before its inspection lands.
    if ((event.Type === 'container' && GONE.has(action)) || action === 'disconnect') this.forget(containerId);
    if (this.listing) this.changedWhileListing.add(containerId);
    else this.track(containerId);
  }

  /** Queues the container's inspection (once, however many events name it); the run watcher may share what it says. */
  private track(containerId: string): void {
    if (!this.inspections.has(containerId)) this.inspections.set(containerId, Promise.withResolvers());
    this.waiting.add(containerId);
    this.pump();
  }

  /** Starts queued inspections while fewer than INSPECT_AT_ONCE are under way, never two of one container. */
  private pump(): void {
    for (const containerId of this.waiting) {
      if (this.inspectionsUnderWay >= INSPECT_AT_ONCE || this.listingWaiters.length > 0) return;
      if (this.inspecting.has(containerId)) continue;
      this.waiting.delete(containerId);
      this.inspecting.add(containerId);
      this.inspectionsUnderWay++;
      void this.refresh(containerId).finally(() => {
        this.inspecting.delete(containerId);
        this.inspectionDone();
      });
    }
  }

  /** A slot for a listing's inspection, once one is free. */
  private async inspectionSlot(): Promise<void> {
    if (this.inspectionsUnderWay < INSPECT_AT_ONCE) {
      this.inspectionsUnderWay++;
      return;
    }
    await new Promise<void>((resolve) => this.listingWaiters.push(resolve));
  }

  /** Hands the slot of a finished inspection to a waiting listing, else to the queue. */
  private inspectionDone(): void {
    const listingWaiter = this.listingWaiters.shift();
    if (listingWaiter) {
      listingWaiter();
      return;
    }
    this.inspectionsUnderWay--;
    this.pump();
  }

  /**
   * Inspects one container after an event and files what it says, unless an event named it again meanwhile
   * (it is queued again, and that inspection files it). A failure other than a 404 does not make the index
   * list everything (which a busy engine answers slower still): the container is inspected again later.
   */
  private async refresh(containerId: string): Promise<void> {
    const generation = this.generation;
    let info: ContainerInspectInfo | undefined;
    let failure: unknown;
    try {
      info = await this.docker.getContainer(containerId).inspect({ abortSignal: AbortSignal.timeout(BACKGROUND_DEADLINE_MS) });
    } catch (err) {
      if (engineStatus(err) !== 404) failure = err;
    }
    if (this.waiting.has(containerId)) return;
    this.inspections.get(containerId)?.resolve(info);
    this.inspections.delete(containerId);
    if (generation !== this.generation || this.closed) return;
    if (failure !== undefined) {
      this.retry(containerId, failure);
      return;
    }
    this.failures.delete(containerId);
    this.startedSince.delete(containerId);
    this.file(containerId, info && indexedFrom(info));
  }

  /** Queues the container again after a delay that doubles with each failure in a row; says so once a second one failed. */
  private retry(containerId: string, err: unknown): void {
    const failed = (this.failures.get(containerId) ?? 0) + 1;
    this.failures.set(containerId, failed);
    const delayMs = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** (failed - 1));
    if (failed === 2) this.report(`the identity index could not inspect a container after an event, twice; it tries again every ${RETRY_MAX_MS / 1000} s at most`, err);
    setTimeout(() => {
      // Unless an event's inspection since has settled it, or the stream was lost (the list after it covers the container).
      if (!this.closed && this.failures.get(containerId) === failed) this.track(containerId);
    }, delayMs).unref();
  }

  /** After a loss of the event stream (the list that follows it covers every queued container), or once closed. */
  private forgetQueue(): void {
    this.generation++;
    this.waiting.clear();
    this.failures.clear();
    for (const pending of this.inspections.values()) pending.resolve(undefined);
    this.inspections.clear();
  }

  /** Puts the container's entry in place of what the index held of it; none removes it. */
  private file(containerId: string, bot: IndexedBot | undefined): void {
    const held = this.byContainer.get(containerId);
    if (held) {
      this.byContainer.delete(containerId);
      if (this.byBotId.get(held.botId) === held) this.byBotId.delete(held.botId);
      for (const address of held.addresses) if (this.byAddress.get(address) === held) this.byAddress.delete(address);
    }
    if (!bot) return;
    this.byContainer.set(containerId, bot);
    this.byBotId.set(bot.botId, bot);
    for (const address of bot.addresses) this.byAddress.set(address, bot);
  }

  /** Drops the container's addresses and marks it stopped at once; its inspection that follows says the rest. */
  private forget(containerId: string): void {
    const held = this.byContainer.get(containerId);
    if (held) this.file(containerId, { ...held, running: false, addresses: [] });
  }

  private async rebuild(): Promise<void> {
    this.listing = true;
    try {
      await this.listWhole();
    } finally {
      this.listing = false;
      // One inspection each, not another list: a burst of starts during a list would otherwise list again and again.
      const changed = this.changedWhileListing;
      this.changedWhileListing = new Set();
      for (const containerId of changed) this.track(containerId);
    }
  }

  private async listWhole(): Promise<void> {
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: [BOT_LABEL] },
      abortSignal: AbortSignal.timeout(BACKGROUND_DEADLINE_MS),
    });
    const known = this.byContainer;
    const restarted = this.startedSince;
    this.startedSince = new Set();
    // Each inspection waits for a slot (INSPECT_AT_ONCE, shared with the queue): a thousand at once would outlast their deadlines.
    const bots = await Promise.all(
      containers.map((container) => this.indexed(container, restarted.has(container.Id) ? undefined : known.get(container.Id))),
    );
    const byAddress = new Map<string, IndexedBot>();
    const byBotId = new Map<string, IndexedBot>();
    const byContainer = new Map<string, IndexedBot>();
    for (const bot of bots) {
      if (!bot) continue;
      byBotId.set(bot.botId, bot);
      byContainer.set(bot.containerId, bot);
      for (const address of bot.addresses) byAddress.set(address, bot);
    }
    this.byAddress = byAddress;
    this.byBotId = byBotId;
    this.byContainer = byContainer;
  }

  /** The index entry of a listed container; undefined unless its name is its bot label. */
  private async indexed(container: ContainerInfo, known: IndexedBot | undefined): Promise<IndexedBot | undefined> {
    const botId = container.Labels[BOT_LABEL];
    if (botId === undefined || !container.Names.includes(`/${botId}`)) return undefined;
    const running = container.State === 'running';
    const addresses = running
      ? Object.values(container.NetworkSettings?.Networks ?? {})
          .flatMap((network) => [network.IPAddress, network.GlobalIPv6Address])
          .filter((address): address is string => Boolean(address))
      : [];
    // TTY never changes, and the start time only when the container starts: inspect
    // a container when it is new, started again, or seen running for the first time.
    if (known && (known.running || !running)) {
      return { containerId: container.Id, botId, running, addresses, tty: known.tty, startedAt: running ? known.startedAt : undefined };
    }
    await this.inspectionSlot();
    let info: ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(container.Id).inspect({ abortSignal: AbortSignal.timeout(BACKGROUND_DEADLINE_MS) });
    } catch (err) {
      // Removed since it was listed (its destroy event, held back while listing, says the same): not a failed list.
      if (engineStatus(err) === 404) return undefined;
      throw err;
    } finally {
      this.inspectionDone();
    }
    const startedAt = running ? new Date(info.State.StartedAt) : undefined;
    return { containerId: container.Id, botId, running, addresses, tty: info.Config.Tty, startedAt };
  }
}

/** The index entry of an inspected container; undefined unless its name is its bot label. */
function indexedFrom(info: ContainerInspectInfo): IndexedBot | undefined {
  const botId = info.Config.Labels?.[BOT_LABEL];
  if (botId === undefined || info.Name !== `/${botId}`) return undefined;
  const running = info.State.Running && !info.State.Paused;
  const addresses = running
    ? Object.values(info.NetworkSettings?.Networks ?? {})
        .flatMap((network) => [network.IPAddress, network.GlobalIPv6Address])
        .filter((address): address is string => Boolean(address))
    : [];
  return { containerId: info.Id, botId, running, addresses, tty: info.Config.Tty, startedAt: running ? new Date(info.State.StartedAt) : undefined };
}

/** The engine's `since`: seconds and nanoseconds since the epoch. */
function sinceParameter(timeNano: number): string {
  const seconds = Math.floor(timeNano / 1e9);
  return `${seconds}.${String(Math.round(timeNano - seconds * 1e9)).padStart(9, '0')}`;
}
