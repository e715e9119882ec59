import type { CommandBounds, CommandResult } from './command-output.js';
import type { BotSummary } from '../provisioning/bot-spec.js';

/** A bot as the runtime sees it; no runtime's own types cross this seam. */
export interface BotInfo {
  /** The bot id, e.g. `bot_12_34_abc`. */
  readonly id: string;
  /** The owning user's id, or undefined when the bot carries no owner. */
  readonly ownerId: string | undefined;
  /** Whether the bot runs now. */
  readonly running: boolean;
  /** When its current run started; undefined when it is not running. */
  readonly startedAt: Date | undefined;
  /** Its health as the runtime's own check says (docs/api.md §13); `none` without one. */
  readonly health: RuntimeHealth;
  /** What its creator asked of the watchdog (labels or annotations). */
  readonly healthPolicy: HealthPolicy;
  /** When this bot (its container, its Deployment) was made: a heartbeat older than that was an earlier bot's of the same id. */
  readonly createdAt?: Date | undefined;
  /** Docker: when its last run ended, for a bot not running (a crash the agent restarts is started only if no later run ended since). */
  readonly endedAt?: Date | undefined;
  /** Its data folders (docs/api.md §19), where the runtime keeps bots' data. */
  readonly dataFolders?: readonly string[] | undefined;
}

/** A bot's health as a check says it (docs/api.md §13). */
export type HealthStatus = 'healthy' | 'unhealthy' | 'starting' | 'none';

/** What the runtime's own check (Docker's HEALTHCHECK, a Kubernetes probe) says of a bot. */
export interface RuntimeHealth {
  readonly status: HealthStatus;
  /** The last failing check's output, bounded (HEALTH_OUTPUT_MAX); null when none failed or it is not known. */
  readonly output: string | null;
}

/** What a bot's creator asked of the watchdog: kept on the bot (Docker labels, Kubernetes annotations). */
export interface HealthPolicy {
  /** How long the bot may stay unhealthy before the watchdog restarts it; undefined: the default. */
  readonly graceMs: number | undefined;
  /** How long after its last heartbeat (or its run's start) a bot expected to beat turns unhealthy; undefined: it is not expected to. */
  readonly heartbeatTtlMs: number | undefined;
  /** When the agent gives up on the bot, and how the watchdog backs off (docs/api.md §13); undefined: never, and the defaults. */
  readonly restart?: RestartPolicy | undefined;
}

/** A bot's restart policy (docs/api.md §13), in ms. */
export interface RestartPolicy {
  /** Crashes (runs ended without a request, the watchdog's restarts included) within `windowMs` past which the bot is stopped; undefined: never. */
  readonly maxCrashes: number | undefined;
  readonly windowMs: number;
  /** The watchdog's first wait between two restarts of the bot, doubling up to `backoffMaxMs`. */
  readonly backoffFirstMs: number;
  readonly backoffMaxMs: number;
  /** False where the runtime restarts the bot's crashes with its own back-off, which the agent cannot hold off (Docker: a container the agent did not make). */
  readonly crashBackOff?: boolean;
}

/** A running bot as the watchdog sees it: what its runtime's check says, and since when. */
export interface RunningHealth {
  readonly botId: string;
  /** Its current run's start (ms). */
  readonly startedAtMs: number;
  readonly status: HealthStatus;
  /** When the check last changed to this status (ms); the run's start when it never did. */
  readonly sinceMs: number;
  readonly policy: HealthPolicy;
  /** When the bot was made (ms): heartbeats from before then were an earlier bot's. */
  readonly createdAtMs?: number | undefined;
}

/** A run of a bot that began. */
export interface RunStart {
  readonly botId: string;
  readonly startedAt: Date;
  /** Names this run's start uniquely, so that one seen twice is recorded once. */
  readonly key: string;
}

/** A run of a bot that ended, as the runtime tells it (docs/api.md §8). */
export interface RunEnd {
  readonly botId: string;
  readonly at: Date;
  /** The main process's exit code; null where the runtime does not say. */
  readonly exitCode: number | null;
  /** The signal that ended it, where the runtime names one apart from the exit code. */
  readonly signal?: string | undefined;
  readonly oomKilled: boolean;
  /** A stop, restart, kill or delete through the agent or the runtime ended it. */
  readonly requested: boolean;
  readonly startedAt: Date | undefined;
  /** The last (up to 100) lines of that run, read when it ended. */
  readonly logs: string;
  /** The runtime ended it for its health (the kubelet, on a failed liveness probe): the check and its output. */
  readonly unhealthy?: { readonly check: 'exec' | 'heartbeat'; readonly output: string | null } | undefined;
  /** The bot's restart policy (null: none) where the runtime tells it with the end (Docker: the labels its event carries); else it is asked. */
  readonly restartPolicy?: RestartPolicy | null | undefined;
  /** Names this run's end uniquely, so that one seen twice is recorded once. */
  readonly key: string;
}

/** Where a driver reports the runs of bots that begin and end. */
export interface RunObserver {
  /** Resolves once the start is kept (or could not be): a runtime hands on a bot's runs one after another. */
  started(run: RunStart): Promise<void>;
  ended(run: RunEnd): Promise<void>;
  /** When the bot's last recorded run ended, also before the agent last started: where its next run's lines begin. */
  lastEnd(botId: string): Promise<Date | undefined>;
}

/** Only the lines written within a time window (docs/api.md §2): after `since`, up to `until`. */
export interface LogWindow {
  readonly since?: Date | undefined;
  readonly until?: Date | undefined;
}

/** Where following a bot's logs begins: its last lines, or every line since a time. */
export type LogsFrom = { readonly lines: number } | { readonly since: Date };

/** One line a bot wrote, for a follower of its logs. */
export interface LogLine {
  readonly line: string;
  readonly stream: 'stdout' | 'stderr';
  readonly at: Date;
}

/** One reading of a running bot's resource use. */
export interface BotStats {
  /** CPU use in percent over a real interval, as `docker stats` computes it. */
  readonly cpuPercent: number;
  /** Memory in use, page cache excluded, in bytes. */
  readonly memoryBytes: number;
  /** Memory in use against the bot's limit (else the host's memory), in percent. */
  readonly memoryPercent: number;
  /** What that percentage is taken against: the bot's memory limit, else the host's (the node's allocatable) memory, in bytes. */
  readonly memoryLimitBytes: number;
  /** When the bot's current run started. */
  readonly startedAt: Date;
  /** Its network and block I/O so far, where the runtime tells them (Docker). */
  readonly io?: BotIo;
}

/** A run's I/O counters since it started, in bytes; null for one the runtime does not tell. */
export interface BotIo {
  readonly networkRxBytes: number | null;
  readonly networkTxBytes: number | null;
  readonly blockReadBytes: number | null;
  readonly blockWriteBytes: number | null;
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

  /** How many bots the driver's index (Docker) or watch (Kubernetes) holds; 0 while it is being built. */
  indexedBots(): number;

  /** The ids of the bots the index or watch holds running now; none while it is being built. */
  runningBots(): string[];

  /**
   * Every running bot the index or watch holds, with its check's status and its health policy, without a
   * call to the runtime; none while it is being built. What the watchdog acts on (docs/api.md §13).
   */
  runningHealth(): readonly RunningHealth[];

  /** Whether the runtime itself restarts a bot whose check fails (Kubernetes' liveness probes): then the watchdog does not. */
  readonly restartsUnhealthy: boolean;

  /**
   * Every bot the index or watch holds, as the platform's listing shows it, without a call to the
   * runtime; undefined while it is being built or its stream is down (the provisioner's listing asks).
   * The same array while nothing changed: never to be changed by a caller.
   */
  listedBots(): readonly BotSummary[] | undefined;

  /** Whether the index or watch holds the bot, from memory; undefined while it is being built. */
  holdsBot(botId: string): boolean | undefined;

  /** The bot with this id. Throws NotFound. */
  findBot(botId: string): Promise<BotInfo>;

  /** The id of the running bot holding this IP address, or undefined. */
  botAtAddress(address: string): Promise<string | undefined>;

  /**
   * The value the bot was made with (GENERATION_LABEL), which its tokens carry: null for a bot made
   * without one, undefined when there is no such bot. Read from memory once the runtime's index holds the
   * bots. Absent where tokens are bound to what runs the bot by the runtime itself (a pod's).
   */
  botGeneration?(botId: string): Promise<string | null | undefined>;

  /**
   * Restarts a running bot, giving it its own grace period to stop, and
   * resolves once it runs again. Throws NotFound, NotRunning, OperationFailed.
   * `unfinishedSince`: an agent that died mid-restart began one then; a runtime
   * that sees that restart under way waits for it rather than beginning another.
   */
  restart(botId: string, unfinishedSince?: Date): Promise<void>;

  /** Stops the bot within its grace period; a stopped bot is left as it is ('already'). */
  stop(botId: string): Promise<PowerOutcome>;

  /** Starts the bot; a running bot is left as it is ('already'). */
  start(botId: string): Promise<PowerOutcome>;

  /**
   * Docker (docs/api.md §13): whether the engine restarts the crashes of a bot the agent made with a restart
   * policy (`unless-stopped`, `on`) or leaves them to the agent's crash back-off (`no`); a bot it did not make,
   * or that has no policy, is left as it is. Absent where the runtime's own restart is held off another way
   * (Kubernetes: the agent scales the bot to 0).
   */
  engineRestarts?(botId: string, on: boolean): Promise<void>;

  /** Docker: from now on, the engine's restarts of each bot in `scope` are taken from it the moment it crashes (engineRestarts off). */
  takeCrashRestarts?(scope: (botId: string) => boolean): void;

  /** Docker: the bots whose crashes the engine leaves to the agent now (engineRestarts off). */
  agentRestartedBots?(): Promise<string[]>;

  /**
   * The last `lines` lines of the bot's stdout and stderr, interleaved in
   * time order, as plain text; works for a stopped bot too. With `window`,
   * the last of those written within it.
   */
  logs(botId: string, lines: number, window?: LogWindow): Promise<string>;

  /**
   * Runs `argv` in the bot's running container as its own user (no shell unless `argv` names one), for a
   * schedule's `command` (docs/api.md §18): its output bounded, killed at its time-out. Throws NotRunning,
   * NotFound. Absent where the runtime cannot run commands in bots.
   */
  exec?(botId: string, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult>;

  /**
   * The secrets the agent gave the bot (its token under each of its names, its PLATFORM_AGENT_TOKEN), which its
   * log history masks (docs/api.md §21). Throws NotFound.
   */
  botSecrets?(botId: string): Promise<string[]>;

  /** Resource use of a running bot. Throws NotRunning. */
  stats(botId: string): Promise<BotStats>;

  /**
   * Every running bot's `stats` at once, where the runtime answers many bots in one call (the metrics of every
   * pod in one list): a bot absent has none now. Each bot's own `stats` read soon after is answered from it too.
   */
  statsRound?(): Promise<ReadonlyMap<string, BotStats>>;

  /**
   * Reports every run of every bot that begins or ends from now on (and, where
   * the runtime can replay them, since `since`), until close.
   */
  observeRuns(observer: RunObserver, since: Date | undefined): void;

  /**
   * Follows the bot's logs: first its last `from.lines` lines (or every line
   * since `from.since`), then each new one, until its current run ends
   * (resolves) or `signal` aborts. Throws NotFound; for a bot that is not
   * running it resolves once the lines asked for are sent.
   */
  followLogs(botId: string, from: LogsFrom, onLine: (line: LogLine) => void, signal: AbortSignal): Promise<void>;

  /** Releases what the driver holds open (event and stats streams, timers). */
  close(): Promise<void>;
}
