/** A bot as the runtime sees it; no runtime's own types cross this seam. */
export interface BotInfo {
  /** The bot id, e.g. `bot_12_34_abc`. */
  readonly id: string;
  /** The owning user's id, or undefined when the bot carries no owner. */
  readonly ownerId: string | undefined;
}

/** One reading of a running bot's resource use. */
export interface BotStats {
  /** CPU use in percent over a real interval, as `docker stats` computes it. */
  readonly cpuPercent: number;
  /** Memory in use, page cache excluded, in bytes. */
  readonly memoryBytes: number;
  /** Memory in use against the bot's limit (else the host's memory), in percent. */
  readonly memoryPercent: number;
  /** When the bot's current run started. */
  readonly startedAt: Date;
}

/**
 * Where a driver reports a fault in its own background work (a runtime
 * stream that broke, something it sent that could not be handled), once per
 * fault; the agent logs it. Never thrown: the driver carries on.
 */
export type FaultReporter = (what: string, err: unknown) => void;

/** What a stop or start did, for a message that says so. */
export type PowerOutcome = 'done' | 'already';

/**
 * The container runtime behind the agent. Every method throws only the
 * errors of `src/errors.ts`: RuntimeUnavailable when the runtime cannot be
 * reached, NotFound when no bot has the id, and what each method names.
 * Access control and serialisation live above this interface.
 */
export interface RuntimeDriver {
  /** The runtime's name, for messages and logs. */
  readonly runtime: 'docker' | 'kubernetes';

  /** Resolves when the runtime answers; throws RuntimeUnavailable otherwise. */
  ping(): Promise<void>;

  /** The bot with this id. Throws NotFound. */
  findBot(botId: string): Promise<BotInfo>;

  /** The id of the running bot holding this IP address, or undefined. */
  botAtAddress(address: string): Promise<string | undefined>;

  /**
   * Restarts a running bot, giving it its own grace period to stop, and
   * resolves once it runs again. Throws NotFound, NotRunning, OperationFailed.
   */
  restart(botId: string): Promise<void>;

  /** Stops the bot within its grace period; a stopped bot is left as it is ('already'). */
  stop(botId: string): Promise<PowerOutcome>;

  /** Starts the bot; a running bot is left as it is ('already'). */
  start(botId: string): Promise<PowerOutcome>;

  /**
   * The last `lines` lines of the bot's stdout and stderr, interleaved in
   * time order, as plain text; works for a stopped bot too.
   */
  logs(botId: string, lines: number): Promise<string>;

  /** Resource use of a running bot. Throws NotRunning. */
  stats(botId: string): Promise<BotStats>;

  /** Releases what the driver holds open (event and stats streams, timers). */
  close(): Promise<void>;
}
