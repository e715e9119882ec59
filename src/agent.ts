import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { deployOf } from './http/admin-routes.js';
import { pullEvents } from './http/pull-events.js';
import { deployRequest, validate } from './http/schemas.js';
import { agentActions } from './schedules/agent-actions.js';
import { BackupFolder } from './backups/backup-folder.js';
import { LogCollector } from './log-history/log-collector.js';
import { shipHistory } from './log-history/log-shipping.js';
import { Alerting } from './alerts/alerting.js';
import { AlertStore } from './alerts/alert-store.js';
import { LogStore } from './log-history/log-store.js';
import { runJudge } from './deploys/run-verdict.js';
import { Backups } from './backups/backups.js';
import { DataUsage } from './data/data-usage.js';
import { BackupStores, readBackupStores } from './backups/backup-stores.js';
import { Scheduler } from './schedules/scheduler.js';
import type { SchedulerOptions } from './schedules/scheduler.js';
import { ScheduleStore } from './schedules/schedule-store.js';
import type Koa from 'koa';
import type { Logger } from 'pino';
import { DEFAULT_BOT_CHAT_BASE, defaultNode } from './config.js';
import type { Config } from './config.js';
import { BotHistory } from './history/bot-history.js';
import { openStore } from './history/open-store.js';
import { WebhookSender, webhookTarget } from './history/webhook.js';
import { chatTargets } from './notify/chat-targets.js';
import { botChatTargets } from './notify/bot-chats.js';
import { loadConsole } from './http/console-assets.js';
import { Heartbeats } from './health/heartbeats.js';
import { Watchdog } from './health/watchdog.js';
import { CrashBackOffs } from './health/crash-backoff.js';
import { NodeBeacon } from './fleet/node-beacon.js';
import { PlacementFence } from './fleet/placement-fence.js';
import { ChatSeal } from './secrets/chat-seal.js';
import type { WatchdogOptions } from './health/watchdog.js';
import { SharedState } from './shared/shared-state.js';
import { createApp } from './http/create-app.js';
import { Readiness } from './http/readiness.js';
import type { RouteEntry } from './http/create-app.js';
import { AgentMetrics } from './http/metrics.js';
import { Deploys } from './deploys/deploys.js';
import { InFlightDeploys } from './deploys/in-flight.js';
import { BotLifecycle } from './lifecycle/bot-lifecycle.js';
import { LocalDeployMarks } from './lifecycle/deploy-marks.js';
import { RateLimiter } from './lifecycle/rate-limiter.js';
import type { BotTokenVerifier } from './identity/bot-tokens.js';
import type { Provisioner } from './provisioning/provisioner.js';
import { localLocks } from './runtime/bot-locks.js';
import type { BotLocks } from './runtime/bot-locks.js';
import { createRuntime } from './runtime/create-runtime.js';
import type { Runtime } from './runtime/create-runtime.js';
import type { RuntimeDriver } from './runtime/driver.js';
import { StatsSamples } from './stats/stats-samples.js';
import type { StatsSamplesOptions } from './stats/stats-samples.js';

/** The longest a lifecycle call waits for the shared rate limit before counting in this agent alone. */
const SHARED_WINDOW_TIMEOUT_MS = 1_000;
/** How long the agent then counts alone before it asks the database again. */
const SHARED_WINDOW_AWAY_MS = 5_000;

/** What the agent reads of the configuration beside the runtime's own settings. */
export type AgentConfig = Pick<
  Config,
  'restartTimeoutMs' | 'adminToken' | 'rateLimit' | 'rateWindowMs' | 'readRate' | 'dataDir' | 'databaseUrl' | 'webhook' | 'trustedHosts' | 'provisioning' | 'loopbackPlatform' | 'identity' | 'proxyAddresses' | 'readyGraceMs'
> &
  Partial<Pick<Config, 'chats' | 'botChatBase' | 'node' | 'nodeUrl' | 'fleetKey' | 'backupDir' | 'backupStoresFile' | 'logHistory'>>;

/** A runtime already made (tests hand their own driver), and what the agent is to do with it. */
export interface AgentParts {
  readonly driver: RuntimeDriver;
  /** Creates and removes bots; without one, those routes answer 501. */
  readonly provisioner?: Provisioner | undefined;
  /** Serialises lifecycle operations across agents; this agent's own queue per bot when undefined. */
  readonly locks?: BotLocks | undefined;
  /** Names bots by their tokens: those the agent signs (Docker), or the cluster's (Kubernetes); none: no token names a bot. */
  readonly botTokens?: BotTokenVerifier | undefined;
  readonly config: AgentConfig;
  readonly logger: Logger;
  /** Tests shorten how long a crash-looping bot must run to recover. */
  readonly recoverAfterMs?: number;
  /** How the console's CPU and memory samples are taken; 'off': never (tests that count runtime calls). */
  readonly statsSamples?: StatsSamplesOptions | 'off';
  /** Tests hurry the schedules' clock (their leases, how often they read every schedule). */
  readonly schedules?: Omit<SchedulerOptions, 'agent'>;
  /** How the watchdog looks (tests: how often, at which bots); 'off': never (tests that count runtime calls, or share an engine). */
  readonly watchdog?: Pick<WatchdogOptions, 'tickMs' | 'watches' | 'acts'> | 'off';
  /** Tests hurry the measures of bots' data folders (docs/api.md §19). */
  readonly dataUsage?: { readonly firstMs?: number; readonly everyMs?: number };
  /** The bots whose restores an agent left this one settles as it starts (tests sharing an engine: their own); else those in its care. */
  readonly restoresInCare?: (botId: string) => boolean;
}

/** The running agent: its HTTP app and what the app stands on. */
export interface Agent {
  readonly app: Koa;
  readonly driver: RuntimeDriver;
  /** Lifecycle operations, serialised per bot; `drain()` waits for those under way. */
  readonly lifecycle: BotLifecycle;
  readonly history: BotHistory;
  /** The console's samples of every running bot's CPU and memory. */
  readonly samples: StatsSamples;
  /** What `/readyz` answers; `stop()` on SIGTERM. */
  readonly readiness: Readiness;
  readonly heartbeats: Heartbeats;
  readonly watchdog: Watchdog;
  readonly routes: RouteEntry[];
  /** Resolves once the history's store can be used; rejects when it cannot be reached. */
  opened(): Promise<void>;
  /** Closes what was built, in the reverse order. */
  close(): Promise<void>;
}

/**
 * The whole agent as the configuration describes it: the runtime AGENT_RUNTIME
 * names, and Leases across agents where the runtime has them and a shared
 * database (AGENT_DATABASE_URL) says that several agents serve the same bots.
 */
export async function createAgent(config: Config, logger: Logger): Promise<Agent> {
  const runtime: Runtime = await createRuntime(config, reporter(logger));
  const shared = config.databaseUrl !== undefined && runtime.sharedLocks !== undefined;
  const locks = shared ? runtime.sharedLocks?.(agentIdentity()) : undefined;
  return assembleAgent({ ...runtime, locks, config, logger, watchdog: { acts: config.watchdog } });
}

/**
 * Builds, in this order, the store, the metrics, the webhook sender, the
 * history, the rate limiter, the lifecycle, the watch of the runtime's runs
 * and the HTTP app, over a runtime already made; `close()` undoes them in
 * the reverse order (the watch and the driver first, the store last).
 */
export function assembleAgent({ driver, provisioner, locks = localLocks, botTokens, config, logger, recoverAfterMs, statsSamples = {}, watchdog: watchdogOptions = {}, schedules: scheduleOptions = {}, restoresInCare, dataUsage: dataUsageOptions }: AgentParts): Agent {
  const report = reporter(logger);
  const closers: (() => Promise<void>)[] = [];
  const { store, sharedWindow, sharedBeats } = (() => {
    try {
      return openStore(config, report);
    } catch (err) {
      throw new Error(`cannot keep history in ${historyPlace(config)}: ${(err as Error).message}`, { cause: err });
    }
  })();
  closers.push(() => store.close());
  const metrics = new AgentMetrics();
  // The signed webhook and the chats (docs/api.md §§9, 16): one queue of deliveries, each target reached once.
  const targets = [...(config.webhook ? [webhookTarget(config.webhook.url, config.webhook.secret)] : []), ...(config.chats ? chatTargets(config.chats) : [])];
  // Always there: a bot may be given chats of its own at any time.
  const webhook = new WebhookSender(store, {
    targets,
    botTargets: async (botId) => {
      const kept = await store.botChats(botId);
      return botChatTargets(kept === undefined ? undefined : history.openChats(botId, kept), config.botChatBase ?? DEFAULT_BOT_CHAT_BASE, report);
    },
    report,
  });
  // The watchdog's switch and scope (AGENT_WATCHDOG; tests sharing one engine keep to their own bots) hold for crash back-offs too.
  const restartsCrashes = watchdogOptions !== 'off' && watchdogOptions.acts !== false;
  const botsInCare = (watchdogOptions === 'off' ? undefined : watchdogOptions.watches) ?? (() => true);
  const node = config.node ?? defaultNode();
  // What the store keeps of a bot's secrets (its chats, a schedule's deploy) is sealed under the agents' own key.
  const seal = ChatSeal.forAgent(config.fleetKey, config.adminToken, config.dataDir);
  const history = new BotHistory(store, new SharedState(store), (botId) => driver.findBot(botId), {
    node,
    recoverAfterMs,
    report,
    deliver: targets.length > 0,
    onKept: (event) => metrics.historyEvent(event),
    // A bot past its restart policy (docs/api.md §13) is stopped, after what is queued on it; a deploy under way judges it itself.
    onGivenUp: (botId) => void lifecycle.stop(botId).catch((err: unknown) => report(`bot ${botId} was given up on but could not be stopped`, err)),
    // A crash of a bot with a restart policy is restarted after its back-off (docs/api.md §13), where this agent restarts bots at all.
    onBackingOff: restartsCrashes ? (backOff) => void backOffs?.hold(backOff) : undefined,
    backsOff: botsInCare,
    spoolDir: config.dataDir === ':memory:' ? undefined : config.dataDir,
    chatSeal: seal,
  });
  metrics.historyStore(() => store.reachable, history.spool);
  const nodes = new NodeBeacon(store, driver, node, config.nodeUrl, config.fleetKey, report);
  closers.push(async () => nodes.close());
  botTokens?.revokeRemovedBots?.((botId) => history.removedAt(botId));
  if (driver.botGeneration) botTokens?.bindToRuntime?.((botId) => driver.botGeneration!(botId));
  closers.push(() => history.close());
  // Deliveries queued by any agent sharing the store are tried as their events arrive.
  history.follow(() => webhook.kick());
  webhook.kick();
  closers.push(() => webhook.close());
  metrics.crashLoopingBots(() => store.crashLoopingCount());
  metrics.indexedBots(() => driver.indexedBots());
  // Agents sharing a store share each bot's lifecycle budget too.
  const limiter = new RateLimiter(
    config.rateLimit,
    config.rateWindowMs,
    Date.now,
    sharedWindow && { window: sharedWindow, timeoutMs: SHARED_WINDOW_TIMEOUT_MS, awayMs: SHARED_WINDOW_AWAY_MS, report },
  );
  const deployMarks = new LocalDeployMarks();
  const lifecycle = new BotLifecycle(driver, config.restartTimeoutMs, locks, deployMarks);
  // Within a fleet, only the copy of a moved bot on the node it is placed on runs (docs/fleet.md).
  const fence = config.fleetKey === undefined ? undefined : new PlacementFence(store, driver, node, lifecycle, history, report);
  if (fence) closers.push(async () => fence.close());
  const backOffs = restartsCrashes ? new CrashBackOffs(lifecycle, history, driver, report, botsInCare) : undefined;
  if (backOffs) {
    void backOffs.resume();
    closers.push(async () => backOffs.close());
  }
  // Where the runtime deploys (docs/api.md §15): its deploys, and those dead agents left, settled from the start.
  const deploys =
    provisioner?.revisions &&
    new Deploys(
      provisioner.revisions,
      history,
      deployMarks,
      (botId) => lifecycle.whenIdle(botId),
      report,
      new InFlightDeploys(config.dataDir === ':memory:' ? undefined : join(config.dataDir, 'deploys')),
    );
  if (deploys) {
    deploys.start();
    closers.push(() => deploys.close());
  }
  // Backups of bots' data (docs/api.md §20), in the backup folder: none where the history is in memory and no folder is named.
  const backupDir = config.backupDir ?? (config.dataDir === ':memory:' ? undefined : join(config.dataDir, 'backups'));
  const backupStores = config.backupStoresFile === undefined ? undefined : new BackupStores(readBackupStores(config.backupStoresFile));
  if (backupStores) closers.push(async () => backupStores.close());
  const backups =
    provisioner?.dataArchives && backupDir !== undefined
      ? new Backups(
          provisioner.dataArchives,
          new BackupFolder(backupDir),
          {
            running: async (botId) => (await driver.findBot(botId)).running,
            stop: (botId) => lifecycle.stop(botId),
            start: (botId) => lifecycle.start(botId),
            ...(provisioner.revisions ? { judge: runJudge(provisioner.revisions, history) } : {}),
            ...(driver.exec ? { command: driver.exec.bind(driver) } : {}),
          },
          provisioner.dataRestores,
          (botId, type, fields) => history.note(botId, type, fields),
          backupStores,
        )
      : undefined;
  // The bytes each bot's data folders use (docs/api.md §19), measured now and then for all at once; past size_mb, told.
  const measure = provisioner?.dataArchives?.usage?.bind(provisioner.dataArchives);
  const dataUsage = measure
    ? new DataUsage(
        measure,
        (use) => void history.note(use.botId, 'data-over-size', { path: use.path, used_bytes: use.bytes, size_mb: use.sizeMb }).catch((err: unknown) => report(`bot ${use.botId}'s data past its size could not be told`, err)),
        report,
        dataUsageOptions,
      )
    : undefined;
  if (dataUsage) {
    closers.push(async () => dataUsage.close());
    metrics.dataUsage(() => dataUsage.totals());
  }
  // Restores an agent was stopped or killed in: finished or undone, and their bots started again where they ran;
  // then bots a backup in stop mode stopped when an agent was killed before it started them again.
  if (backups) {
    const inCare = restoresInCare ?? botsInCare;
    void (async () => {
      for (const [settled, what] of [
        [() => backups.settleRestores(inCare), 'restores'],
        // A move's bot is started again only where the fleet still places it (docs/api.md §17).
        [() => backups.startStopped(inCare, async (botId) => (fence === undefined ? true : ((await fence.placementOf(botId))?.node ?? node) === node)), 'backups'],
      ] as const) {
        try {
          for (const failure of (await settled()).failures) report(`a bot cut ${what} left could not be settled`, new Error(failure));
        } catch (err) {
          report(`the ${what} an agent left could not be read`, err);
        }
      }
    })();
  }
  // Schedules (docs/api.md §18): this agent runs those of the bots its runtime holds, where the fleet places them.
  const schedules = new ScheduleStore(store.sql(), seal);
  const scheduler = new Scheduler(
    schedules,
    agentActions({
      driver,
      lifecycle,
      history,
      deploys,
      deployOf: (body) => deployOf(validate(deployRequest, body)),
      pulls: (botId) => pullEvents(history, botId),
      onAsked: (botId) => backOffs?.asked(botId),
      backups,
    }),
    (botId, type, fields) => history.note(botId, type, fields),
    (botId) => driver.holdsBot(botId) === true && fence?.placedElsewhere(botId) === undefined,
    report,
    { agent: `${node}/${process.pid}/${randomBytes(4).toString('hex')}`, ...scheduleOptions },
  );
  scheduler.start();
  closers.push(() => scheduler.close());
  // Runs are watched once the history says since when (a runtime replays what came after); closing the driver ends the watch.
  const watching = history.lastSeen().then(
    (since) => driver.observeRuns(history, since),
    (err: unknown) => {
      report('the history could not be read; watching runs from now', err);
      driver.observeRuns(history, undefined);
    },
  );
  closers.push(async () => {
    await watching;
    await driver.close();
  });
  // Before the driver closes (closers run last first): the back-offs' stops under way are carried out.
  if (backOffs) closers.push(() => backOffs.settled());
  // Kept across restarts in AGENT_DATA_DIR (docs/api.md §12), unless the agent keeps nothing on disk.
  const samplesFile = config.dataDir === ':memory:' ? undefined : join(config.dataDir, 'stats-samples');
  const samples = new StatsSamples(driver, statsSamples === 'off' ? {} : { file: samplesFile, ...statsSamples }, report);
  if (statsSamples !== 'off') samples.start();
  closers.push(() => samples.close());
  metrics.statsSamples(samples);
  const heartbeats = new Heartbeats(sharedBeats, report);
  heartbeats.start();
  closers.push(() => heartbeats.close());
  const watchdog = new Watchdog(driver, heartbeats, history, (botId) => lifecycle.restartInFull(botId), {
    report,
    ...(watchdogOptions === 'off' ? {} : watchdogOptions),
  });
  if (watchdogOptions !== 'off') watchdog.start();
  closers.push(async () => watchdog.close());
  metrics.health(watchdog, heartbeats);
  // Every bot's output, kept across its runs in a store of the agent's own (docs/api.md §21).
  const logHistory = config.logHistory ? new LogCollector(driver, new LogStore(config.dataDir, report), config.logHistory, report) : undefined;
  // Every kept line shipped to the log database, where one is configured (docs/api.md §21); its gaps kept as lines.
  const logDatabase = config.logHistory?.databaseUrl;
  if (logHistory && logDatabase !== undefined) {
    const shipper = shipHistory(logHistory.store, new URL('/insert/loki/api/v1/push', logDatabase).href, node, report, config.logHistory?.shipping);
    closers.push(() => shipper.close());
  } else {
    logHistory?.store.forgetShipping();
  }
  // Alert rules (docs/api.md §22): told as `alert` events, and so to the webhook and the chats.
  const alertStore = new AlertStore(store.sql());
  const alerting = new Alerting(alertStore, driver, (botId, fields) => history.note(botId, 'alert', fields), report);
  alerting.start();
  closers.push(async () => alerting.close());
  logHistory?.listen((botId, line) => alerting.onLine(botId, line));
  if (logHistory) {
    // Each run's start, as the history hears of it, names the run of the lines written from then on.
    const unfollow = history.follow((event) => {
      if (event.type === 'started') logHistory.runStarted(event.botId, Date.parse((JSON.parse(event.data) as { at: string }).at));
    });
    logHistory.start();
    metrics.logHistory(logHistory.store);
    closers.push(async () => {
      unfollow();
      await logHistory.close();
    });
  }
  const readiness = new Readiness(driver, config.readyGraceMs);
  const { app, routes } = createApp({
    driver,
    provisioner,
    deploys,
    lifecycle,
    limiter,
    history,
    metrics,
    samples,
    watchdog,
    heartbeats,
    readiness,
    botTokens,
    console: loadConsole(),
    config,
    logger,
    // What the platform or the bot asks for ends a crash back-off: it is not undone when the wait is over.
    onAsked: (botId) => backOffs?.asked(botId),
    nodes,
    fence,
    schedules: { store: schedules, scheduler },
    backups,
    dataUsage,
    logHistory,
    alerts: { store: alertStore, alerting },
  });
  return {
    app,
    driver,
    lifecycle,
    history,
    samples,
    readiness,
    heartbeats,
    watchdog,
    routes,
    opened: () => store.opened(),
    close: async () => {
      for (const close of [...closers].reverse()) await close();
    },
  };
}

/** Where the history is kept, as a message may say it: a database URL's password is never repeated. */
export function historyPlace(config: Pick<Config, 'dataDir' | 'databaseUrl'>): string {
  if (config.databaseUrl === undefined) return `AGENT_DATA_DIR=${config.dataDir}`;
  const host = URL.parse(config.databaseUrl)?.host;
  return host ? `AGENT_DATABASE_URL (${host})` : 'AGENT_DATABASE_URL';
}

function reporter(logger: Logger): (what: string, err: unknown) => void {
  return (what, err) => logger.warn({ err }, what);
}

/** Who this agent is, as a Lease's holder says: its pod's name (HOSTNAME in a pod), and its process. */
function agentIdentity(): string {
  return `${process.env.HOSTNAME ?? 'agent'}-${process.pid}`;
}
