import { execInContainer } from './docker-exec.js';
import type { CommandBounds, CommandResult } from '../command-output.js';
import type Docker from 'dockerode';
import { LRUCache } from 'lru-cache';
import type { ContainerInfo, ContainerInspectInfo } from 'dockerode';
import { messages, NotFound, NotRunning, OperationFailed } from '../../errors.js';
import type { BotSummary } from '../../provisioning/bot-spec.js';
import type { BotInfo, BotStats, FaultReporter, LogLine, LogsFrom, LogWindow, PowerOutcome, RunningHealth, RunObserver, RuntimeDriver, RuntimeHealth } from '../driver.js';
import { boundedOutput, healthStatusOf } from '../health-policy.js';
import { generationIn } from '../../bot-id.js';
import { BOT_LABEL, GENERATION_LABEL, OWNER_LABEL } from '../labels.js';
import { isLoopback } from '../../loopback.js';
import { DockerBotIndex } from './docker-bot-index.js';
import { CgroupStats } from './docker-cgroup.js';
import { engineClients } from './docker-connection.js';
import type { EngineClients } from './docker-connection.js';
import { signalled } from './docker-signals.js';
import { engineStatus, translateDockerError } from './docker-errors.js';
import { readLogFile } from './docker-log-file.js';
import { followLogs, readLogs } from './docker-logs.js';
import { TOKEN_VARIABLES } from '../../provisioning/bot-spec.js';
import { DockerRunWatcher, EXIT_LOG_LINES } from './docker-runs.js';
import { agentRestartable, dockerHealthPolicy } from './docker-policy.js';
import { ContainerStopped, DockerStatsFeed } from './docker-stats-feed.js';
import { botStatsFrom } from './docker-stats.js';
import { ENGINE_DEADLINE_MS } from './docker-deadline.js';
import { UNDO_SUFFIX } from './docker-revisions.js';
import { dataFoldersOf } from './docker-volumes.js';

/** How often the bots whose crashes the agent restarts are read from the engine again (docs/api.md §13). */
const AGENT_RESTARTED_READ_MS = 5 * 60_000;
/** How long a stop, start or restart may take beyond the container's own grace period. */
const LIFECYCLE_MARGIN_MS = 30_000;
const DEFAULT_GRACE_S = 10;
/** How often the lines of a run that ended are tried for. */
const RUN_LOG_ATTEMPTS = 3;
/** How long an address that no running bot held at the last look is taken as no bot's, without asking the engine again. */
const STRANGER_MS = 5_000;

type Failed = (detail: string) => OperationFailed;
const engineFailed: Failed = (detail) => new OperationFailed(`Docker engine error: ${detail}`);

/** The bot whose running container holds the address: the container named by its id that carries the bot label with that id. */
function botHolding(running: readonly ContainerInfo[], address: string): string | undefined {
  const holder = running.find((container) => holdsAddress(container, address));
  const botId = holder?.Labels[BOT_LABEL];
  return botId !== undefined && holder?.Names.includes(`/${botId}`) ? botId : undefined;
}

/** A bot is the container named by its id that carries the bot label with that id. */
class DockerDriver implements RuntimeDriver {
  readonly runtime = 'docker';
  private readonly index: DockerBotIndex;
  private readonly statsFeed: DockerStatsFeed;
  private readonly cgroups: CgroupStats;
  /** Addresses no running bot held at the last look (docs/api.md §4: a stranger is refused) ... */
  private readonly strangers = new LRUCache<string, true>({ max: 10_000, ttl: STRANGER_MS });
  /** ... and the look-up under way, which every address that misses the index meanwhile shares. */
  private runningListing: { readonly listed: Promise<ContainerInfo[]>; readonly begunAtMs: number } | undefined;
  /** The runs of bots, once observeRuns began: it hears of the agent's stops. */
  private runWatcher: DockerRunWatcher | undefined;
  /** The bots whose crashes the agent restarts, the engine not (docs/api.md §13), as far as this agent knows ... */
  private readonly agentRestarted = new Set<string>();
  /** ... once those an earlier agent left so were read (and read again every AGENT_RESTARTED_READ_MS). */
  private agentRestartedRead: { readonly read: Promise<void>; readonly atMs: number } | undefined;
  /** The bots whose restarts are taken from the engine as they crash, once an agent restarts crashes itself. */
  private crashRestartsTaken: ((botId: string) => boolean) | undefined;

  private readonly docker: Docker;
  /** For calls that last: followed logs and lifecycle operations (see EngineClients). */
  private readonly lasting: Docker;

  constructor(
    engine: EngineClients,
    private readonly report: FaultReporter,
    cgroupRoot?: string,
    /** Whether logs reads take the engine's json-file logs where they can be read (docs/docker.md); else the engine always answers. */
    private readonly logFiles = true,
  ) {
    this.docker = engine.docker;
    this.lasting = engine.lasting;
    this.index = new DockerBotIndex(engine.docker, report, engine.lasting);
    this.statsFeed = new DockerStatsFeed(engine.lasting, report);
    this.cgroups = new CgroupStats(cgroupRoot);
  }

  async ping(): Promise<void> {
    await this.engine(undefined, (abortSignal) => signalled(this.docker).ping({ abortSignal }));
  }

  indexedBots(): number {
    return this.index.count('bot');
  }

  runningBots(): string[] {
    return this.index.running();
  }

  readonly restartsUnhealthy = false;

  runningHealth(): RunningHealth[] {
    const health: RunningHealth[] = [];
    for (const bot of this.index.all() ?? []) {
      if (!bot.running || bot.startedAt === undefined) continue;
      health.push({ botId: bot.botId, startedAtMs: bot.startedAt.getTime(), status: bot.health, sinceMs: bot.healthSinceMs, policy: bot.healthPolicy, createdAtMs: bot.createdAtMs });
    }
    return health;
  }

  holdsBot(botId: string): boolean | undefined {
    const held = this.index.byIndex('bot', botId);
    return held === undefined ? undefined : held.length > 0;
  }

  listedBots(): BotSummary[] | undefined {
    return this.index.all()?.map((bot) => ({
      bot_id: bot.botId,
      user_id: bot.ownerId,
      template: bot.template,
      state: bot.running ? 'running' : 'stopped',
      started_at: bot.startedAt?.toISOString(),
      image: bot.image,
      revision: bot.revision,
    }));
  }

  async findBot(botId: string): Promise<BotInfo> {
    const info = await this.inspectBot(botId);
    const running = info.State.Running;
    return {
      id: botId,
      ownerId: info.Config.Labels?.[OWNER_LABEL],
      running,
      startedAt: running ? new Date(info.State.StartedAt) : undefined,
      health: running ? healthOf(info.State.Health) : { status: 'none', output: null },
      healthPolicy: dockerHealthPolicy(info.Config.Labels ?? {}),
      createdAt: new Date(info.Created),
      endedAt: running || info.State.FinishedAt.startsWith('0001-') ? undefined : new Date(info.State.FinishedAt),
      dataFolders: dataFoldersOf(botId, info.Mounts ?? []),
    };
  }

  observeRuns(observer: RunObserver, since: Date | undefined): void {
    const runs = new DockerRunWatcher(
      observer,
      (botId, containerId, since, until) => this.runLogs(botId, containerId, since, until),
      async (containerId) => {
        const info = await this.index.inspect(containerId);
        return info && new Date(info.State.StartedAt);
      },
      this.report,
      // At once, before the crash is recorded: the engine restarts at once only the crash it has seen already.
      (botId, labels) => {
        if (this.crashRestartsTaken?.(botId) && agentRestartable(labels)) {
          void this.takeRestarts(botId).catch((err: unknown) => this.report(`bot ${botId} crashed, but its restarts could not be taken from the engine`, err));
        }
      },
    );
    this.runWatcher = runs;
    this.index.watch((event) => runs.onEvent(event), since);
    this.index.onRelisted((listed) => {
      runs
        .recover(listed, (containerId) => this.index.inspect(containerId))
        .catch((err: unknown) => this.report('the runs the engine\'s event stream missed while it was down could not be read', err));
    });
  }

  async engineRestarts(botId: string, on: boolean): Promise<void> {
    let info: ContainerInspectInfo;
    try {
      info = await this.inspectBot(botId);
    } catch (err) {
      if (err instanceof NotFound) this.agentRestarted.delete(botId);
      throw err;
    }
    if (!agentRestartable(info.Config.Labels ?? {})) return;
    const [from, to] = on ? ['no', 'unless-stopped'] : ['unless-stopped', 'no'];
    if (info.HostConfig.RestartPolicy?.Name === from) {
      // An update takes no abort signal (dockerode would send it in the body): it is a quick write of the engine's.
      await this.translated(botId, () => this.docker.getContainer(info.Id).update({ RestartPolicy: { Name: to, MaximumRetryCount: 0 } }));
    } else if (info.HostConfig.RestartPolicy?.Name !== to) return;
    if (on) this.agentRestarted.delete(botId);
    else this.agentRestarted.add(botId);
  }

  /**
   * A crashed bot's restarts taken from the engine in one call, no inspect first: its next crash may come within a
   * second. Its labels said the agent made it, and the agent makes its bots `unless-stopped`.
   */
  private async takeRestarts(botId: string): Promise<void> {
    await this.translated(botId, () => this.docker.getContainer(botId).update({ RestartPolicy: { Name: 'no', MaximumRetryCount: 0 } }));
    this.agentRestarted.add(botId);
  }

  takeCrashRestarts(scope: (botId: string) => boolean): void {
    this.crashRestartsTaken = scope;
  }

  async agentRestartedBots(): Promise<string[]> {
    // Read from the engine now and then too: a container whose restarts were taken before it was set aside (a deploy
    // kept it) may be the bot again after a rollback, with no crash to tell of it.
    if (this.agentRestartedRead === undefined || Date.now() - this.agentRestartedRead.atMs > AGENT_RESTARTED_READ_MS) {
      const read = this.readAgentRestarted().catch((err: unknown) => {
        if (this.agentRestartedRead?.read === read) this.agentRestartedRead = undefined;
        throw err;
      });
      this.agentRestartedRead = { read, atMs: Date.now() };
    }
    await this.agentRestartedRead.read;
    return [...this.agentRestarted];
  }

  /** The bots whose crashes an agent took from the engine (this one, or one before it), as the engine says. */
  private async readAgentRestarted(): Promise<void> {
    const listed = await this.engine(undefined, (abortSignal) => this.docker.listContainers({ all: true, filters: { label: [GENERATION_LABEL, BOT_LABEL] }, abortSignal }));
    const candidates = listed.filter((container) => agentRestartable(container.Labels) && container.Names.includes(`/${container.Labels[BOT_LABEL]}`));
    for (const container of candidates) {
      // The engine asked at once, each with its deadline: not the index's queue, whose turn may be long coming on a busy engine.
      const info = await this.engine(undefined, (abortSignal) => this.docker.getContainer(container.Id).inspect({ abortSignal })).catch(() => undefined);
      if (info?.HostConfig.RestartPolicy?.Name === 'no') this.agentRestarted.add(container.Labels[BOT_LABEL]!);
    }
  }

  async followLogs(botId: string, from: LogsFrom, onLine: (line: LogLine) => void, signal: AbortSignal): Promise<void> {
    const { containerId, tty } = await this.logTarget(botId);
    // A line stamped after a death seen since the follow began is the next run's: the follow ends there (docs/api.md §10).
    const diedBefore = this.index.diedAt(containerId);
    const nextRun = (line: LogLine): boolean => {
      const died = this.index.diedAt(containerId);
      return died !== undefined && died !== diedBefore && line.at.getTime() > died;
    };
    await this.translated(botId, () => followLogs(this.lasting, containerId, tty, from, onLine, signal, nextRun));
  }

  /**
   * The index answers; an address it does not hold (a bot started a moment ago, or a stranger) is looked
   * up in the engine's list of running bots, one look-up at a time shared by every such address, and an
   * address no bot held is not looked up again for STRANGER_MS: strangers cannot make the agent list
   * every container per request.
   */
  async botAtAddress(address: string): Promise<string | undefined> {
    const indexed = this.index.byIndex('address', address)?.[0];
    if (indexed) return indexed.botId;
    // No container holds a loopback address.
    if (isLoopback(address) || this.strangers.has(address)) return undefined;
    const askedAtMs = performance.now();
    let listing = this.sharedRunningListing();
    let botId = botHolding(await listing.listed, address);
    // A listing begun before the ask may predate the bot's start: only one begun after it may call the address a stranger's.
    if (botId === undefined && listing.begunAtMs < askedAtMs) {
      listing = this.sharedRunningListing(askedAtMs);
      botId = botHolding(await listing.listed, address);
    }
    if (botId !== undefined) return botId;
    this.strangers.set(address, true);
    return undefined;
  }

  /** The listing of running bots under way, or a new one when none is, or the one under way began before notBeforeMs. */
  private sharedRunningListing(notBeforeMs = -Infinity): { readonly listed: Promise<ContainerInfo[]>; readonly begunAtMs: number } {
    if (this.runningListing !== undefined && this.runningListing.begunAtMs >= notBeforeMs) return this.runningListing;
    const listing = {
      begunAtMs: performance.now(),
      listed: this.engine(undefined, (abortSignal) =>
        this.docker.listContainers({ filters: { label: [BOT_LABEL], status: ['running'] }, abortSignal }),
      ).finally(() => {
        if (this.runningListing === listing) this.runningListing = undefined;
      }),
    };
    this.runningListing = listing;
    return listing;
  }

  async botSecrets(botId: string): Promise<string[]> {
    const env = (await this.inspectBot(botId)).Config.Env ?? [];
    const named = new Set<string>([...TOKEN_VARIABLES, 'PLATFORM_AGENT_TOKEN']);
    return env.filter((entry) => named.has(entry.slice(0, entry.indexOf('=')))).map((entry) => entry.slice(entry.indexOf('=') + 1));
  }

  async botGeneration(botId: string): Promise<string | null | undefined> {
    const indexed = this.index.byIndex('bot', botId)?.[0];
    if (indexed !== undefined) return indexed.generation;
    // Not in the index (being built, or a bot made a moment ago that its events have not brought yet): the engine answers.
    try {
      return generationIn((await this.inspectBot(botId)).Config.Labels?.[GENERATION_LABEL]);
    } catch (err) {
      if (err instanceof NotFound) return undefined;
      throw err;
    }
  }

  async restart(botId: string): Promise<void> {
    const info = await this.runningBot(botId);
    const failed: Failed = (detail) => new OperationFailed(messages.restartFailed(botId, detail));
    try {
      // Without `t` the engine waits the container's own StopTimeout (else 10 s) before it kills.
      await this.engine(botId, (abortSignal) => this.lasting.getContainer(botId).restart({ abortSignal }), {
        failed,
        deadlineMs: lifecycleDeadline(info),
      });
    } catch (err) {
      await this.startIfStopped(botId);
      throw err;
    }
  }

  async stop(botId: string): Promise<PowerOutcome> {
    const info = await this.inspectBot(botId);
    if (!info.State.Running) return 'already';
    const stopped = this.runWatcher?.stopping(info.Id);
    try {
      return await this.power(botId, 'stop', lifecycleDeadline(info), (abortSignal) => this.lasting.getContainer(botId).stop({ abortSignal }));
    } finally {
      stopped?.();
    }
  }

  async start(botId: string): Promise<PowerOutcome> {
    const info = await this.inspectBot(botId);
    if (info.State.Running) return 'already';
    return this.power(botId, 'start', LIFECYCLE_MARGIN_MS, (abortSignal) =>
      this.lasting.getContainer(botId).start({ abortSignal }),
    );
  }

  async logs(botId: string, lines: number, window: LogWindow = {}): Promise<string> {
    const { containerId, tty, logPath } = await this.logTarget(botId);
    const windowed = window.since !== undefined || window.until !== undefined;
    // Where the agent may read the engine's log file, it answers alone (docs/docker.md); a window is the engine's to read.
    const fromFile = logPath && this.logFiles && !windowed ? await readLogFile(logPath, tty, lines) : undefined;
    if (fromFile !== undefined) return fromFile;
    // readLogs keeps its own deadline: a large log may take longer to send than a quick call, but never stalls.
    // No quick call's deadline signal, unused, whose timer would fire seconds after each read.
    return this.translated(botId, () => readLogs(this.docker, containerId, tty, lines, window));
  }

  async exec(botId: string, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult> {
    const info = await this.inspectBot(botId);
    if (!info.State.Running) throw new NotRunning(messages.notRunning(botId));
    return this.translated(botId, () => execInContainer(this.lasting, info.Id, argv, bounds));
  }

  async stats(botId: string): Promise<BotStats> {
    // Where the host's cgroup files are visible, they answer, read on demand: no engine call at all
    // once the index knows the bot runs and since when. Elsewhere the engine's stats stream does.
    const indexed = this.index.byIndex('bot', botId)?.[0];
    const startedAt = indexed?.running ? indexed.startedAt : undefined;
    // A start the index has not inspected yet would be answered as the run before it: the engine says which run it is.
    if (indexed && startedAt && !this.index.settling(indexed.containerId)) {
      const known = this.cgroups.recent(indexed.containerId, startedAt) ?? (await this.statsAtHand(indexed.containerId, startedAt));
      if (known) return known;
    }
    const info = await this.runningBot(botId);
    const started = new Date(info.State.StartedAt);
    const known = await this.statsAtHand(info.Id, started);
    if (known) return known;
    try {
      return botStatsFrom(await this.statsFeed.sample(info.Id), started);
    } catch (err) {
      // It stopped while read: a bot that crashes and is started again by its restart policy is not a failing engine.
      if (err instanceof ContainerStopped) throw new NotRunning(messages.notRunning(botId));
      // The stream ends when the container goes away: tell that apart from an engine failure.
      if (engineStatus(err) === undefined) await this.runningBot(botId);
      throw translateDockerError(err, botId);
    }
  }

  async close(): Promise<void> {
    this.index.close();
    this.statsFeed.close();
    this.cgroups.close();
  }

  /** Stats without waiting on the engine: from the cgroup files, else the stats stream's recent sample. */
  private async statsAtHand(containerId: string, startedAt: Date): Promise<BotStats | undefined> {
    const measured = await this.cgroups.stats(containerId, startedAt);
    if (measured) return measured;
    const latest = this.statsFeed.latest(containerId);
    return latest && botStatsFrom(latest, startedAt);
  }

  /**
   * The last lines of one run of a container (written after `since`, up to
   * `until`); '' once the container is gone. Read in the background, so a busy
   * engine that misses the read's deadline gets two more tries.
   */
  private async runLogs(botId: string, containerId: string, since: Date | undefined, until: Date): Promise<string> {
    // A millisecond either side: the engine's times are finer than the window's.
    const window = { since: since && new Date(since.getTime() + 1), until: new Date(until.getTime() + 1) };
    for (let attempt = 1; ; attempt += 1) {
      try {
        const indexed = this.index.byIndex('bot', botId)?.[0];
        const tty =
          indexed?.containerId === containerId
            ? indexed.tty
            : (await this.docker.getContainer(containerId).inspect({ abortSignal: AbortSignal.timeout(ENGINE_DEADLINE_MS) })).Config.Tty;
        return await readLogs(this.docker, containerId, tty, EXIT_LOG_LINES, window);
      } catch (err) {
        const status = engineStatus(err);
        // 404: removed; 409: being removed. Their lines are gone.
        if (status === 404 || status === 409 || attempt === RUN_LOG_ATTEMPTS) return '';
        await new Promise((resolve) => setTimeout(resolve, 1_000 * attempt));
      }
    }
  }


  /** The container whose logs are the bot's, and whether it has a TTY. */
  private async logTarget(botId: string): Promise<{ containerId: string; tty: boolean; logPath: string }> {
    const indexed = this.index.byIndex('bot', botId)?.[0];
    if (indexed) return indexed;
    const info = await this.inspectBot(botId);
    return { containerId: info.Id, tty: info.Config.Tty, logPath: info.LogPath ?? '' };
  }

  private async inspectBot(botId: string): Promise<ContainerInspectInfo> {
    try {
      return await this.inspectNamed(botId, botId);
    } catch (err) {
      // In the moment a deploy switches its runs (docs/api.md §15), the bot is its old run, stopped, under `<id>.undo`.
      if (!(err instanceof NotFound)) throw err;
      return this.inspectNamed(botId, `${botId}${UNDO_SUFFIX}`).catch(() => Promise.reject(err));
    }
  }

  /** The container named `name` that carries the bot's label; NotFound otherwise. */
  private async inspectNamed(botId: string, name: string): Promise<ContainerInspectInfo> {
    const info = await this.engine(botId, (abortSignal) => this.docker.getContainer(name).inspect({ abortSignal }));
    // The engine also resolves id prefixes; the agent never touches an unlabelled container.
    if (info.Name !== `/${name}` || info.Config.Labels?.[BOT_LABEL] !== botId) {
      throw new NotFound(messages.botNotFound(botId));
    }
    return info;
  }

  private async runningBot(botId: string): Promise<ContainerInspectInfo> {
    const info = await this.inspectBot(botId);
    if (!info.State.Running) throw new NotRunning(messages.notRunning(botId));
    return info;
  }

  /** A restart that failed half-way must not leave a running bot stopped. */
  private async startIfStopped(botId: string): Promise<void> {
    try {
      const info = await this.inspectBot(botId);
      if (!info.State.Running) await this.engine(botId, (abortSignal) => this.lasting.getContainer(botId).start({ abortSignal }));
    } catch {
      // The restart's own failure is what the caller hears of.
    }
  }

  /** Stop or start; the engine's 304 means another caller got there first. */
  private async power(
    botId: string,
    verb: string,
    deadlineMs: number,
    call: (abortSignal: AbortSignal) => Promise<unknown>,
  ): Promise<PowerOutcome> {
    try {
      await call(AbortSignal.timeout(deadlineMs));
      return 'done';
    } catch (err) {
      if (engineStatus(err) === 304) return 'already';
      throw translateDockerError(err, botId, (detail) => new OperationFailed(`Failed to ${verb} bot ${botId}: ${detail}`));
    }
  }

  /**
   * One engine call under a deadline (a stalled engine is an unreachable one),
   * its failure translated at this edge.
   */
  private async engine<T>(
    botId: string | undefined,
    call: (abortSignal: AbortSignal) => Promise<T>,
    { failed, deadlineMs = ENGINE_DEADLINE_MS }: { failed?: Failed; deadlineMs?: number } = {},
  ): Promise<T> {
    return this.translated(botId, () => call(AbortSignal.timeout(deadlineMs)), failed);
  }

  /** Engine work whose failure is translated at this edge. */
  private async translated<T>(botId: string | undefined, work: () => Promise<T>, failed: Failed = engineFailed): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw translateDockerError(err, botId, failed);
    }
  }
}

/** How long a stop or restart of this container may take: its grace period, and a margin. */
function lifecycleDeadline(info: ContainerInspectInfo): number {
  const graceS = (info.Config as { StopTimeout?: number }).StopTimeout ?? DEFAULT_GRACE_S;
  return graceS * 1000 + LIFECYCLE_MARGIN_MS;
}

function holdsAddress(container: ContainerInfo, address: string): boolean {
  return Object.values(container.NetworkSettings?.Networks ?? {}).some(
    (network) => network.IPAddress === address || network.GlobalIPv6Address === address,
  );
}

/**
 * The Docker driver, talking to the engine at DOCKER_HOST over `engine`'s connections (its own when none
 * is given); faults of its event and stats streams go to `report`.
 */
export function createDockerDriver(options: { dockerHost: string; engine?: EngineClients; report?: FaultReporter; cgroupRoot?: string; logFiles?: boolean }): RuntimeDriver {
  return new DockerDriver(options.engine ?? engineClients(options.dockerHost), options.report ?? (() => {}), options.cgroupRoot, options.logFiles);
}

/** What a container's HEALTHCHECK says: its status, and the output of its newest check that failed. */
function healthOf(health: ContainerInspectInfo['State']['Health']): RuntimeHealth {
  const failed = health?.Log?.findLast((check) => check.ExitCode !== 0);
  return { status: healthStatusOf(health?.Status), output: boundedOutput(failed?.Output) };
}
