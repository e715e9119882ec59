import type Docker from 'dockerode';
import type { DockerStatsSample } from './docker-stats.js';
import type { FaultReporter } from '../driver.js';
import { eachJsonLine } from './json-lines.js';

interface Feed {
  stream: NodeJS.ReadableStream & { destroy?: () => void };
  /** Resolves with the first sample that spans a real interval. */
  first: Promise<DockerStatsSample>;
  latest: DockerStatsSample | undefined;
  /** When `latest` arrived. */
  receivedAt: number;
  lastRead: number;
}

/** The engine sends a sample a second; a stream silent for longer than this has stalled. */
const STALE_MS = 3_000;
/** How long opening a stream may take. */
const OPEN_DEADLINE_MS = 1_500;
/** How long a cold read waits for the stream's first sample that spans an interval (one comes a second). */
const FIRST_SAMPLE_DEADLINE_MS = 3_000;

/** What a stream that ends or stalls rejects its waiting read with. */
const streamGone = (why: string) => Object.assign(new Error(`the stats stream ${why}`), { code: 'ERR_STREAM_PREMATURE_CLOSE' });

/** The stream reported the container stopped (it may be running again by now, under a restart policy). */
export class ContainerStopped extends Error {
  constructor() {
    super('the stats stream reports a container that no longer runs');
  }
}

/**
 * Keeps the engine's stats stream open for each container read recently, so
 * that a read answers at once with the latest sample. The engine sends one a
 * second, each spanning the second before it; the first sample of a stream
 * has no earlier reading, so a cold read waits for the second, about 1 s.
 * Streams nobody read for `idleMs` are closed.
 */
export class DockerStatsFeed {
  private readonly feeds = new Map<string, Promise<Feed>>();
  /** The feeds whose stream is open, for reads that must not wait. */
  private readonly ready = new Map<string, Feed>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly docker: Docker,
    private readonly report: FaultReporter = () => {},
    private readonly idleMs = 60_000,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1_000, idleMs / 2)).unref();
  }

  /** The latest sample of the container, opening its stream when none is open. */
  async sample(containerId: string): Promise<DockerStatsSample> {
    let feed = this.feeds.get(containerId);
    if (!feed) {
      const opening: Promise<Feed> = this.open(containerId, () => this.forget(containerId, opening));
      this.feeds.set(containerId, opening);
      opening.then(
        (open) => {
          if (this.feeds.get(containerId) === opening) this.ready.set(containerId, open);
        },
        () => undefined,
      );
      opening.catch(() => this.forget(containerId, opening));
      feed = opening;
    }
    const open = await feed;
    open.lastRead = Date.now();
    if (open.latest) return open.latest;
    let deadline: NodeJS.Timeout | undefined;
    const stalled = new Promise<never>((_, reject) => {
      deadline = setTimeout(() => {
        this.drop(containerId);
        reject(streamGone('sent no sample in time'));
      }, FIRST_SAMPLE_DEADLINE_MS);
    });
    return Promise.race([open.first, stalled]).finally(() => clearTimeout(deadline));
  }

  /** The latest sample when the container's stream has one already; counts as a read. */
  latest(containerId: string): DockerStatsSample | undefined {
    const feed = this.ready.get(containerId);
    if (!feed?.latest) return undefined;
    if (Date.now() - feed.receivedAt > STALE_MS) {
      this.drop(containerId);
      return undefined;
    }
    feed.lastRead = Date.now();
    return feed.latest;
  }

  /** Opens the container's stream, if it is not open, without waiting for a sample. */
  warm(containerId: string): void {
    this.sample(containerId).catch(() => undefined);
  }

  /** Forgets the container's stream, e.g. once it stopped or restarted. */
  drop(containerId: string): void {
    const feed = this.feeds.get(containerId);
    this.feeds.delete(containerId);
    this.ready.delete(containerId);
    void feed?.then((open) => open.stream.destroy?.(), () => undefined);
  }

  private forget(containerId: string, feed: Promise<Feed>): void {
    if (this.feeds.get(containerId) !== feed) return;
    this.feeds.delete(containerId);
    this.ready.delete(containerId);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const id of [...this.feeds.keys()]) this.drop(id);
  }

  private async open(containerId: string, onEnd: () => void): Promise<Feed> {
    // A deadline on the opening only: the signal must not end the stream later.
    const opening = new AbortController();
    const deadline = setTimeout(() => opening.abort(), OPEN_DEADLINE_MS);
    const container = this.docker.getContainer(containerId) as unknown as {
      stats(options: { stream: true; abortSignal: AbortSignal }): Promise<Feed['stream']>;
    };
    const stream = await container.stats({ stream: true, abortSignal: opening.signal }).finally(() => clearTimeout(deadline));
    let resolveFirst: (sample: DockerStatsSample) => void = () => {};
    let rejectFirst: (err: Error) => void = () => {};
    const feed: Feed = {
      stream,
      first: new Promise((resolve, reject) => {
        resolveFirst = resolve;
        rejectFirst = reject;
      }),
      latest: undefined,
      receivedAt: 0,
      lastRead: Date.now(),
    };
    feed.first.catch(() => undefined);
    eachJsonLine<DockerStatsSample>(
      stream,
      (sample) => {
        // A container that stopped gets zero-time samples a second, without end: its stream is over.
        if (sample.read?.startsWith('0001-')) {
          this.drop(containerId);
          rejectFirst(new ContainerStopped());
          return;
        }
        if (!sample.precpu_stats?.system_cpu_usage) return;
        feed.latest = sample;
        feed.receivedAt = Date.now();
        resolveFirst(sample);
      },
      (err) => this.report(`a stats sample of container ${containerId.slice(0, 12)} that could not be read`, err),
    );
    const ended = (): void => {
      onEnd();
      rejectFirst(streamGone('ended'));
    };
    stream.on('end', ended);
    stream.on('error', ended);
    stream.on('close', ended);
    return feed;
  }

  private sweep(): void {
    const cutoff = Date.now() - this.idleMs;
    for (const [id, feed] of this.feeds) {
      void feed.then((open) => {
        if (open.lastRead < cutoff) this.drop(id);
      }, () => undefined);
    }
  }
}
