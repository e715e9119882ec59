import { messages, NotFound, NotRunning, OperationFailed, RuntimeUnavailable } from '../../src/errors.js';
import { EventEmitter, once } from 'node:events';
import type { BotSummary } from '../../src/provisioning/bot-spec.js';
import type { BotInfo, BotStats, HealthPolicy, LogLine, LogsFrom, PowerOutcome, RunningHealth, RunObserver, RuntimeDriver, RuntimeHealth } from '../../src/runtime/driver.js';

/** A bot held by MemoryDriver. */
export interface MemoryBot {
  id: string;
  ownerId: string | undefined;
  running: boolean;
  address: string | undefined;
  startedAt: Date;
  logLines: string[];
  restarts: number;
  /** What its runtime check says, and since when (ms). */
  health: RuntimeHealth;
  healthSinceMs: number;
  healthPolicy: HealthPolicy;
}

/**
 * An in-memory RuntimeDriver for the HTTP layer's tests: bots are records,
 * and every call is recorded so that tests can see what was touched.
 */
export class MemoryDriver implements RuntimeDriver {
  readonly runtime = 'docker';
  readonly bots = new Map<string, MemoryBot>();
  /** Every driver call, as `method:botId`, in order. */
  readonly calls: string[] = [];
  reachable = true;
  /** When set, restarts wait for it before they finish. */
  restartGate: Promise<void> | undefined;
  /** When set, restarts fail with this engine detail. */
  restartFailure: string | undefined;
  /** The observer the agent gave observeRuns, to report runs through. */
  observer: RunObserver | undefined;
  /** `line:<botId>` for each line written live, `end:<botId>` when a run ends. */
  private readonly live = new EventEmitter().setMaxListeners(0);
  /** The lines written with `write`, with their times, by bot. */
  private readonly written = new Map<string, LogLine[]>();
  private inFlight = 0;
  /** The most operations that ever ran at once. */
  maxInFlight = 0;

  add(bot: Partial<MemoryBot> & { id: string }): MemoryBot {
    const full: MemoryBot = {
      ownerId: 'user_1',
      running: true,
      address: undefined,
      startedAt: new Date(Date.now() - 3_723_000),
      logLines: [],
      restarts: 0,
      health: { status: 'none', output: null },
      healthSinceMs: Date.now(),
      healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined },
      ...bot,
    };
    this.bots.set(bot.id, full);
    return full;
  }

  /** The calls that changed a bot's state. */
  get lifecycleCalls(): string[] {
    return this.calls.filter((call) => /^(restart|stop|start):/.test(call));
  }

  async ping(): Promise<void> {
    this.reach();
  }

  indexedBots(): number {
    return this.bots.size;
  }

  holdsBot(botId: string): boolean {
    return this.bots.has(botId);
  }

  listedBots(): BotSummary[] {
    return [...this.bots.values()].map((bot) => ({
      bot_id: bot.id,
      user_id: bot.ownerId,
      template: undefined,
      state: bot.running ? 'running' : 'stopped',
      image: undefined,
      revision: 1,
      started_at: bot.running ? bot.startedAt.toISOString() : undefined,
    }));
  }

  runningBots(): string[] {
    return [...this.bots.values()].filter((bot) => bot.running).map((bot) => bot.id);
  }

  readonly restartsUnhealthy = false;

  runningHealth(): RunningHealth[] {
    return [...this.bots.values()]
      .filter((bot) => bot.running)
      .map((bot) => ({ botId: bot.id, startedAtMs: bot.startedAt.getTime(), status: bot.health.status, sinceMs: bot.healthSinceMs, policy: bot.healthPolicy }));
  }

  async findBot(botId: string): Promise<BotInfo> {
    const bot = this.get('findBot', botId);
    return {
      id: bot.id,
      ownerId: bot.ownerId,
      running: bot.running,
      startedAt: bot.running ? bot.startedAt : undefined,
      health: bot.running ? bot.health : { status: 'none', output: null },
      healthPolicy: bot.healthPolicy,
    };
  }

  observeRuns(observer: RunObserver): void {
    this.observer = observer;
  }

  /** The bot writes a line: its followers get it, and a read since a time before `at`. */
  write(botId: string, line: string, at = new Date()): void {
    this.bots.get(botId)?.logLines.push(line);
    const written = { line, stream: 'stdout', at } satisfies LogLine;
    this.written.set(botId, [...(this.written.get(botId) ?? []), written]);
    this.live.emit(`line:${botId}`, written);
  }

  /** The bot's run ends: its followers' streams end. */
  endRun(botId: string): void {
    const bot = this.bots.get(botId);
    if (bot) bot.running = false;
    this.live.emit(`end:${botId}`);
  }

  async followLogs(botId: string, from: LogsFrom, onLine: (line: LogLine) => void, signal: AbortSignal): Promise<void> {
    const bot = this.get('followLogs', botId);
    if ('lines' in from) {
      const lines = from.lines === 0 ? [] : bot.logLines.slice(-from.lines);
      for (const line of lines) onLine({ line, stream: 'stdout', at: bot.startedAt });
    } else for (const line of this.written.get(botId) ?? []) if (line.at >= from.since) onLine(line);
    if (!bot.running) return;
    this.live.on(`line:${botId}`, onLine);
    try {
      await once(this.live, `end:${botId}`, { signal });
    } catch {
      // aborted
    } finally {
      this.live.off(`line:${botId}`, onLine);
    }
  }

  async botAtAddress(address: string): Promise<string | undefined> {
    this.reach();
    return [...this.bots.values()].find((bot) => bot.running && bot.address === address)?.id;
  }

  async restart(botId: string): Promise<void> {
    const bot = this.get('restart', botId);
    if (!bot.running) throw new NotRunning(messages.notRunning(botId));
    await this.operation(async () => {
      await this.restartGate;
      if (this.restartFailure) throw new OperationFailed(messages.restartFailed(botId, this.restartFailure));
      bot.restarts += 1;
      bot.startedAt = new Date();
    });
  }

  async stop(botId: string): Promise<PowerOutcome> {
    const bot = this.get('stop', botId);
    return this.operation(async () => {
      if (!bot.running) return 'already';
      bot.running = false;
      return 'done';
    });
  }

  async start(botId: string): Promise<PowerOutcome> {
    const bot = this.get('start', botId);
    return this.operation(async () => {
      if (bot.running) return 'already';
      bot.running = true;
      bot.startedAt = new Date();
      return 'done';
    });
  }

  async logs(botId: string, lines: number): Promise<string> {
    const bot = this.get('logs', botId);
    return bot.logLines.slice(-lines).map((line) => `${line}\n`).join('');
  }

  async stats(botId: string): Promise<BotStats> {
    const bot = this.get('stats', botId);
    if (!bot.running) throw new NotRunning(messages.notRunning(botId));
    return { cpuPercent: 12.3456, memoryBytes: 47_405_793, memoryPercent: 4.567, memoryLimitBytes: 1_038_000_000, startedAt: bot.startedAt };
  }

  async close(): Promise<void> {}

  private reach(): void {
    if (!this.reachable) throw new RuntimeUnavailable(messages.runtimeUnavailable('docker'));
  }

  private get(method: string, botId: string): MemoryBot {
    this.reach();
    this.calls.push(`${method}:${botId}`);
    const bot = this.bots.get(botId);
    if (!bot) throw new NotFound(messages.botNotFound(botId));
    return bot;
  }

  private async operation<T>(body: () => Promise<T>): Promise<T> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      // A turn of the event loop, so that overlapping operations would show.
      await new Promise((resolve) => setImmediate(resolve));
      return await body();
    } finally {
      this.inFlight -= 1;
    }
  }
}
