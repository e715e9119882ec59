import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { StoredEvent } from '../history/history-store.js';
import type { HealthStatus } from '../runtime/driver.js';

/**
 * How often the event loop's delay is sampled. prom-client's default, 10 ms, wakes the
 * process a hundred times a second: 0.25% of a core, all that an idle agent spent. A
 * stall of the loop is still seen whole by the sample due during it.
 */
const EVENT_LOOP_SAMPLE_MS = 100;
/** How often, at most, a scrape has the crash-looping bots counted again. */
export const CRASH_LOOP_COUNT_MS = 5_000;

/** The agent's Prometheus metrics, in a registry of its own. */
/** prom-client's default metrics that are gauges with a counter's `_total`. */
const GAUGES_NAMED_AS_COUNTERS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export class AgentMetrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: 'bot_agent_http_requests_total',
    help: 'HTTP requests answered, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  readonly latency = new Histogram({
    name: 'bot_agent_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });

  readonly lifecycle = new Counter({
    name: 'bot_agent_lifecycle_operations_total',
    help: 'Restarts, stops and starts, by operation and result',
    labelNames: ['operation', 'result'] as const,
    registers: [this.registry],
  });

  readonly runtimeErrors = new Counter({
    name: 'bot_agent_runtime_errors_total',
    help: 'Failed calls to the container runtime, by kind (unavailable, failed)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly exits = new Counter({
    name: 'bot_agent_bot_exits_total',
    help: 'Runs of bots that ended, by whether the kernel killed them for memory and whether a stop or restart ended them',
    labelNames: ['oom', 'requested'] as const,
    registers: [this.registry],
  });

  /** Counts what an event says happened to a bot. */
  readonly watchdogRestarts = new Counter({
    name: 'bot_agent_watchdog_restarts_total',
    help: 'Restarts of unhealthy bots the watchdog claimed on this agent (docs/api.md §13)',
    labelNames: ['check'] as const,
    registers: [this.registry],
  });

  historyEvent(event: StoredEvent): void {
    if (event.type === 'restarted') this.watchdogRestarts.inc({ check: (JSON.parse(event.data) as { check: string }).check });
    if (event.type !== 'exited') return;
    const { exit } = JSON.parse(event.data) as { exit: { oom_killed: boolean; requested: boolean } };
    this.exits.inc({ oom: String(exit.oom_killed), requested: String(exit.requested) });
  }

  /** The gauge of the bots the driver's index holds, read from `count` when scraped. */
  indexedBots(count: () => number): void {
    this.gauge(
      'bot_agent_indexed_bots',
      "Bots the agent's index of containers (Docker) or watch of Deployments (Kubernetes) holds; 0 while it is being built or its stream is down",
      count,
    );
  }

  /**
   * The gauge of crash-looping bots, from `count` (a query of the history's database) at most once every
   * CRASH_LOOP_COUNT_MS, in the background: `/metrics` needs no credentials, so a flood of scrapes is not a
   * flood of queries, and a database that does not answer never holds a scrape.
   */
  crashLoopingBots(count: () => Promise<number>): void {
    this.gauge('bot_agent_crash_looping_bots', 'Bots in the crash-looping state (3 or more unrequested ends within 10 minutes)', countedAtMostEvery(CRASH_LOOP_COUNT_MS, count));
  }

  /** The bytes bots' data folders use together, and those past their size_mb, as last measured (docs/api.md §19). */
  dataUsage(totals: () => { bytes: number; overSize: number }): void {
    this.gauge('bot_agent_data_folder_bytes', "Bytes the bots' data folders use together, as last measured (every 5 minutes)", () => totals().bytes);
    this.gauge('bot_agent_data_folders_over_size', 'Data folders that use more than their size_mb, as last measured', () => totals().overSize);
  }

  /** Running bots by health, as the watchdog last judged them, and the bots whose heartbeats it holds. */
  health(watchdog: { counts(): Record<HealthStatus, number> }, heartbeats: { readonly size: number }): void {
    const gauge = new Gauge({
      name: 'bot_agent_bots_health',
      help: 'Running bots by health (healthy, unhealthy, starting, none), as the watchdog last judged them (docs/api.md §13)',
      labelNames: ['status'] as const,
      registers: [this.registry],
      collect() {
        for (const [status, count] of Object.entries(watchdog.counts())) gauge.set({ status }, count);
      },
    });
    this.gauge('bot_agent_heartbeat_bots', 'Bots whose latest heartbeat this agent holds (one entry each, in memory)', () => heartbeats.size);
  }

  /** What the console's samples of CPU and memory hold. */
  statsSamples(samples: { readonly bots: number; readonly bytes: number }): void {
    this.gauge('bot_agent_stats_sampled_bots', 'Bots with CPU and memory samples of the last 15 minutes kept for the console', () => samples.bots);
    this.gauge('bot_agent_stats_sample_bytes', "Bytes the samples' arrays take", () => samples.bytes);
  }

  /** Whether the history's database answers, and what waits for it in the spool. */
  historyStore(up: () => boolean, spool: { readonly size: number; readonly waitingBytes: number; readonly dropped: number; readonly damaged: number }): void {
    this.gauge('bot_agent_database_up', "1 while the history's store answers, 0 while it is away (writes then wait in the spool)", () => (up() ? 1 : 0));
    this.gauge('bot_agent_history_spool_writes', 'Writes of exit records, events and deliveries waiting in the spool for the store to answer', () => spool.size);
    this.gauge('bot_agent_history_spool_bytes', 'Bytes of JSON waiting in the spool (bounded; past the bound new writes are dropped)', () => spool.waitingBytes);
    this.counted('bot_agent_history_spool_dropped_writes_total', 'Writes lost since the agent started because the spool was full', () => spool.dropped);
    this.counted(
      'bot_agent_history_spool_damaged_lines_total',
      'Lines of the spool found damaged at start (cut off by a crash or a full disk) and set aside in history-spool.damaged, since the agent started',
      () => spool.damaged,
    );
  }

  /** What the log history kept and dropped (docs/api.md §21). */
  logHistory(store: { readonly kept: number; readonly dropped: number }): void {
    this.counted('bot_agent_log_history_kept_lines_total', "Bots' lines kept in the log history since the agent started", () => store.kept);
    this.counted(
      'bot_agent_log_history_dropped_lines_total',
      "Bots' lines the log history could not keep since the agent started (its disk full, or its writes behind); each bot's own gaps are lines of its history",
      () => store.dropped,
    );
  }

  /** A counter (it only grows while the agent runs, so `_total`, as Prometheus names counters) whose count is read from `read` when scraped. */
  private counted(name: `${string}_total`, help: string, read: () => number): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  /** A gauge whose value is read from `read` when scraped; a read that fails (a store away) leaves the last value. */
  private gauge(name: string, help: string, read: () => number | Promise<number>): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        try {
          this.set(await read());
        } catch {
          // The last value stands; the scrape still answers.
        }
      },
    });
  }

  private readonly requestSeries = new Map<string, { count(): void; observe(seconds: number): void }>();

  constructor() {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    // Gauges named as counters, which Prometheus' own checker refuses (docs/operating.md): the same counts stay,
    // by type, in nodejs_active_handles, nodejs_active_requests and nodejs_active_resources.
    for (const name of GAUGES_NAMED_AS_COUNTERS) this.registry.removeSingleMetric(name);
  }

  /**
   * Counts one answered request. The labelled series are looked up once per
   * method, route and status and kept: prom-client hashes labels on every
   * plain inc or observe, which on a hot path halved the agent's throughput.
   */
  answered(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let series = this.requestSeries.get(key);
    if (!series) {
      const counter = this.requests.labels(method, route, String(status));
      const histogram = this.latency.labels(method, route, String(status));
      series = { count: () => counter.inc(), observe: (value) => histogram.observe(value) };
      this.requestSeries.set(key, series);
    }
    series.count();
    series.observe(seconds);
  }
}

/**
 * A figure that `count` reads (a query), asked at most once every `ms` and never twice at once. A call
 * answers the last figure read at once, and has it read again in the background when it is older than
 * `ms`; only the very first call waits for it. A read that fails leaves the figure before it standing.
 */
export function countedAtMostEvery(ms: number, count: () => Promise<number>, now: () => number = Date.now): () => number | Promise<number> {
  let figure: number | undefined;
  let askedAtMs = -Infinity;
  let asking: Promise<void> | undefined;
  return () => {
    if (asking === undefined && now() - askedAtMs >= ms) {
      askedAtMs = now();
      asking = count()
        .then((value) => void (figure = value), () => undefined)
        .finally(() => (asking = undefined));
    }
    if (figure !== undefined) return figure;
    return (asking ?? Promise.resolve()).then(() => {
      if (figure === undefined) throw new Error('not counted yet');
      return figure;
    });
  };
}
