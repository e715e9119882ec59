import type Docker from 'dockerode';
import type { ContainerInspectInfo } from 'dockerode';
import type { FaultReporter } from '../driver.js';
import { engineStatus } from './docker-errors.js';

/** An inspection that failed other than with a 404 is tried again after this, doubled on each failure up to RETRY_MAX_MS. */
const RETRY_MS = 500;
const RETRY_MAX_MS = 10_000;
/**
 * How long an inspection may take: no caller waits for it, and the engine is slow when many
 * containers start at once (it answers an inspection once the start is done).
 */
export const BACKGROUND_DEADLINE_MS = 10_000;
/** How many containers are inspected at once, the queue after events and a whole listing together. */
const INSPECT_AT_ONCE = 16;

/**
 * The inspections that keep an index of containers current after events: one
 * per container however many events name it, INSPECT_AT_ONCE at a time
 * (shared with a listing's, which go first: the list is what the index waits
 * for), one that fails tried again with a growing delay. What an inspection
 * says goes to `settled`, unless an event named the container again meanwhile
 * (it is queued again, and that inspection says it) or the queue was dropped
 * since it began (the listing after a lost stream is newer).
 */
export class InspectionQueue {
  /** What the inspection after a container's latest event will say, which others may share. */
  private readonly pending = new Map<string, PromiseWithResolvers<ContainerInspectInfo | undefined>>();
  /** Containers to inspect, oldest first; one named again while it is inspected is inspected again after. */
  private readonly waiting = new Set<string>();
  private readonly inspecting = new Set<string>();
  /** Inspections under way at the engine, the queue's and a listing's together. */
  private underWay = 0;
  /** A listing's inspections waiting for a slot. */
  private readonly listingWaiters: Array<() => void> = [];
  /** Per container, how often its inspection has failed in a row. */
  private readonly failures = new Map<string, number>();
  /** Counts drops of the queue: an inspection begun before one is not settled. */
  private generation = 0;
  private closed = false;

  constructor(
    private readonly docker: Docker,
    private readonly report: FaultReporter,
    /** What an inspection said of a container: undefined when it no longer exists. */
    private readonly settled: (containerId: string, info: ContainerInspectInfo | undefined) => void,
  ) {}

  /** Queues the container's inspection (once, however many events name it). */
  track(containerId: string): void {
    if (!this.pending.has(containerId)) this.pending.set(containerId, Promise.withResolvers());
    this.waiting.add(containerId);
    this.pump();
  }

  /**
   * The container as the engine describes it now: the queued inspection's
   * answer when one is under way (so that a start is inspected once), else a
   * new one; undefined when it cannot be had.
   */
  inspect(containerId: string): Promise<ContainerInspectInfo | undefined> {
    return this.pending.get(containerId)?.promise ?? this.inspectNow(containerId).catch(() => undefined);
  }

  /** Whether an event named the container and the inspection after it has not yet settled. */
  settling(containerId: string): boolean {
    return this.pending.has(containerId);
  }

  /** A listing's inspection of one container, in a slot of the queue's, ahead of the queue. */
  async forListing(containerId: string): Promise<ContainerInspectInfo> {
    if (this.underWay < INSPECT_AT_ONCE) this.underWay++;
    else await new Promise<void>((resolve) => this.listingWaiters.push(resolve));
    try {
      return await this.inspectNow(containerId);
    } finally {
      this.slotFreed();
    }
  }

  /** Forgets every queued inspection and failure: after a lost stream the listing that follows covers them. */
  drop(): void {
    this.generation++;
    this.waiting.clear();
    this.failures.clear();
    for (const pending of this.pending.values()) pending.resolve(undefined);
    this.pending.clear();
  }

  close(): void {
    this.closed = true;
    this.drop();
  }

  private inspectNow(containerId: string): Promise<ContainerInspectInfo> {
    return this.docker.getContainer(containerId).inspect({ abortSignal: AbortSignal.timeout(BACKGROUND_DEADLINE_MS) });
  }

  /** Starts queued inspections while slots are free and no listing waits, never two of one container. */
  private pump(): void {
    for (const containerId of this.waiting) {
      if (this.underWay >= INSPECT_AT_ONCE || this.listingWaiters.length > 0) return;
      if (this.inspecting.has(containerId)) continue;
      this.waiting.delete(containerId);
      this.inspecting.add(containerId);
      this.underWay++;
      void this.refresh(containerId).finally(() => {
        this.inspecting.delete(containerId);
        this.slotFreed();
      });
    }
  }

  /** Hands a freed slot to a waiting listing, else to the queue. */
  private slotFreed(): void {
    const listingWaiter = this.listingWaiters.shift();
    if (listingWaiter) {
      listingWaiter();
      return;
    }
    this.underWay--;
    this.pump();
  }

  /** A failure other than a 404 does not make the index list everything (which a busy engine answers slower still). */
  private async refresh(containerId: string): Promise<void> {
    const generation = this.generation;
    let info: ContainerInspectInfo | undefined;
    let failure: unknown;
    try {
      info = await this.inspectNow(containerId);
    } catch (err) {
      if (engineStatus(err) !== 404) failure = err;
    }
    if (this.waiting.has(containerId)) return;
    this.pending.get(containerId)?.resolve(info);
    this.pending.delete(containerId);
    if (generation !== this.generation || this.closed) return;
    if (failure !== undefined) {
      this.retry(containerId, failure);
      return;
    }
    this.failures.delete(containerId);
    this.settled(containerId, info);
  }

  /** Queues the container again after a delay that doubles with each failure in a row; says so once a second one failed. */
  private retry(containerId: string, err: unknown): void {
    const failed = (this.failures.get(containerId) ?? 0) + 1;
    this.failures.set(containerId, failed);
    const delayMs = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** (failed - 1));
    if (failed === 2) this.report(`the identity index could not inspect a container after an event, twice; it tries again every ${RETRY_MAX_MS / 1000} s at most`, err);
    setTimeout(() => {
      // Unless an event's inspection since has settled it, or the queue was dropped.
      if (!this.closed && this.failures.get(containerId) === failed) this.track(containerId);
    }, delayMs).unref();
  }
}
