import type Docker from 'dockerode';
import type { ContainerInfo, ContainerInspectInfo } from 'dockerode';
import type { FaultReporter, HealthPolicy, HealthStatus } from '../driver.js';
import { healthInStatusLine, healthPolicyOf, healthStatusOf } from '../health-policy.js';
import type { IndexedCache } from '../indexed-cache.js';
import { TEMPLATE_LABEL } from '../../provisioning/bot-spec.js';
import { generationIn } from '../../bot-id.js';
import { BOT_LABEL, GENERATION_LABEL, OWNER_LABEL, REVISION_LABEL, revisionIn } from '../labels.js';
import { DockerEventStream } from './docker-events.js';
import { mayHaveStartedSince, startedAfter } from './docker-uptime.js';
import type { EngineEvent } from './docker-events.js';
import { engineStatus } from './docker-errors.js';
import { BACKGROUND_DEADLINE_MS, InspectionQueue } from './docker-inspections.js';

export type { EngineEvent } from './docker-events.js';

/** A labelled container as the index knows it. */
export interface IndexedBot {
  readonly containerId: string;
  readonly botId: string;
  readonly running: boolean;
  /** Its owner and template, from its labels. */
  readonly ownerId: string | undefined;
  readonly template: string | undefined;
  /** The image it was made of, as asked for, and its revision (docs/api.md §15), from its labels. */
  readonly image: string;
  readonly revision: number;
  readonly addresses: readonly string[];
  /** Whether the container has a TTY (so its logs carry no stream framing). */
  readonly tty: boolean;
  /** Where the engine writes its log, when it is a file (json-file); '' otherwise or before the first start. */
  readonly logPath: string;
  /** When the current run started, for a running container (parsed once here, not on every read of its stats). */
  readonly startedAt: Date | undefined;
  /** What its HEALTHCHECK says, and since when (ms) as the engine's events or this index saw it change. */
  readonly health: HealthStatus;
  readonly healthSinceMs: number;
  /** What its labels ask of the watchdog. */
  readonly healthPolicy: HealthPolicy;
  /** When the container was made (ms). */
  readonly createdAtMs: number;
  /** The value it was made with (GENERATION_LABEL), if it carries one of that shape. */
  readonly generation: string | null;
}

/** Container events after which a container no longer holds its addresses. */
const GONE = new Set(['die', 'kill', 'stop', 'destroy', 'pause']);
/** Container events that change what the index holds of a container (exec, attach, health and the like do not). */
const CHANGES = new Set([...GONE, 'create', 'start', 'restart', 'unpause', 'rename', 'update']);
/** The indexes a bot is filed under: the addresses it holds while it runs, and its id. */
export type BotIndex = 'address' | 'bot';

/**
 * Which bot holds which address, and which container is which bot, kept
 * current from the engine's event stream (docker-events), so that identifying
 * a caller costs no engine call. The index is listed whole whenever the stream
 * opens; after that each event that changes a container has that one container
 * inspected (docker-inspections), so a burst of events never lists every
 * container again. While the stream is down, and before it first opens,
 * nothing is answered from the index.
 */
export class DockerBotIndex implements IndexedCache<IndexedBot, BotIndex> {
  private byAddress = new Map<string, readonly [IndexedBot]>();
  private byBotId = new Map<string, readonly [IndexedBot]>();
  private byContainer = new Map<string, IndexedBot>();
  private readonly stream: DockerEventStream;
  private readonly inspections: InspectionQueue;
  private listedOnce = false;
  private failedOnce = false;
  /** Set while the index is listed whole. */
  private listing = false;
  /** Containers an event named while the index was listed whole: the list may predate the event, so each is inspected after it. */
  private changedWhileListing = new Set<string>();
  /** Counts listings begun: only the newest is filed. */
  private listings = 0;
  /** Containers that started since the last listing, whose start time must be read again. */
  private startedSince = new Set<string>();
  /** When each container's process last died (ms, the engine's clock), as its events said. */
  private readonly deaths = new Map<string, number>();
  /** Called each time the index is listed again after its stream was lost. */
  private readonly relistedListeners: Array<(listed: (botId: string) => IndexedBot | undefined) => void> = [];

  /** `lasting`: the client the event stream holds its connection on (see EngineClients); `docker` by default. */
  constructor(
    private readonly docker: Docker,
    report: FaultReporter = () => {},
    lasting: Docker = docker,
  ) {
    this.inspections = new InspectionQueue(docker, report, (containerId, info) => {
      this.startedSince.delete(containerId);
      this.file(containerId, info && indexedFrom(info));
    });
    this.stream = new DockerEventStream(lasting, report, {
      event: (event) => this.take(event),
      opened: async () => {
        await this.list();
        const again = this.listedOnce;
        this.listedOnce = true;
        // Before the stream counts as open (and whether or not it is lost again meanwhile): what was just listed.
        if (again) for (const relisted of this.relistedListeners) relisted((botId) => this.byBotId.get(botId)?.[0]);
      },
      lost: () => {
        this.failedOnce = true;
        this.inspections.drop();
      },
    });
  }

  byIndex(index: BotIndex, key: string): readonly IndexedBot[] | undefined {
    this.stream.start();
    if (!this.stream.open) return undefined;
    return (index === 'address' ? this.byAddress : this.byBotId).get(key) ?? NONE;
  }

  count(index: BotIndex): number {
    if (!this.stream.open) return 0;
    return index === 'address' ? this.byAddress.size : this.byBotId.size;
  }

  /** The ids of the bots whose container runs; none while the index is not current. */
  running(): string[] {
    if (!this.stream.open) return [];
    return [...this.byBotId.values()].filter(([bot]) => bot.running).map(([bot]) => bot.botId);
  }

  /** Every bot the index holds; undefined while it is not current. */
  all(): IndexedBot[] | undefined {
    if (!this.stream.open) return undefined;
    return [...this.byBotId.values()].map(([bot]) => bot);
  }

  get synced(): boolean {
    return this.listedOnce || this.failedOnce;
  }

  /**
   * Hands every container event to `listener` from now on, and those since
   * `since` that the engine still holds (it keeps its last 256 or so). After a
   * lost stream, the new subscription replays what came in between.
   */
  watch(listener: (event: EngineEvent) => void, since: Date | undefined): void {
    this.stream.listen(listener, since);
    this.stream.start();
  }

  /**
   * Calls `listener` each time the index has been listed again after its stream was lost (its replay may have
   * missed events), with what the listing holds of each bot.
   */
  onRelisted(listener: (listed: (botId: string) => IndexedBot | undefined) => void): void {
    this.relistedListeners.push(listener);
  }

  /** The container as the engine describes it now, sharing the inspection an event of it started. */
  inspect(containerId: string): Promise<ContainerInspectInfo | undefined> {
    return this.inspections.inspect(containerId);
  }

  /**
   * Whether what the index holds of the container may predate an event of it: one came, and the inspection after it
   * has not landed (a listing files what it listed, and inspects after it each container an event named meanwhile).
   */
  settling(containerId: string): boolean {
    return this.inspections.settling(containerId);
  }

  /** When the container's process last died (ms, the engine's clock) since the agent began watching; undefined if not seen. */
  diedAt(containerId: string): number | undefined {
    return this.deaths.get(containerId);
  }

  /** How many containers' deaths are kept: those of containers that still exist. */
  get deathsKept(): number {
    return this.deaths.size;
  }

  close(): void {
    this.stream.close();
    this.inspections.close();
  }

  private take(event: EngineEvent): void {
    if (event.Type === 'container' && event.Action?.startsWith(HEALTH_STATUS)) {
      this.healthChanged(event);
      return;
    }
    const containerId = event.Type === 'network' ? event.Actor?.Attributes?.container : event.Actor?.ID;
    const action = event.Action ?? '';
    // Containers without the bot label are no bots; a network event matters only for a container the index holds.
    const changes =
      event.Type === 'container'
        ? CHANGES.has(action) && event.Actor?.Attributes?.[BOT_LABEL] !== undefined
        : (action === 'connect' || action === 'disconnect') && containerId !== undefined && this.byContainer.has(containerId);
    if (!containerId || !changes) return;
    if (event.Type === 'container' && action === 'die' && event.timeNano !== undefined) this.deaths.set(containerId, Math.floor(event.timeNano / 1e6));
    if (event.Type === 'container' && action === 'destroy') this.deaths.delete(containerId);
    if (event.Type === 'container' && action === 'start') this.startedSince.add(containerId);
    // A container that stops gives up its addresses at once, before its inspection lands.
    if ((event.Type === 'container' && GONE.has(action)) || action === 'disconnect') this.forget(containerId);
    if (this.listing) this.changedWhileListing.add(containerId);
    else this.inspections.track(containerId);
  }

  /** A container's HEALTHCHECK changed its verdict: the entry says so at once, with no inspection. */
  private healthChanged(event: EngineEvent): void {
    // A listing under way may predate the verdict: the container is inspected after it.
    if (this.listing && event.Actor?.ID !== undefined) this.changedWhileListing.add(event.Actor.ID);
    const held = event.Actor?.ID === undefined ? undefined : this.byContainer.get(event.Actor.ID);
    const health = healthStatusOf(event.Action?.slice(HEALTH_STATUS.length).trim());
    if (!held || held.health === health) return;
    const at = event.timeNano !== undefined ? Math.floor(event.timeNano / 1e6) : Date.now();
    this.file(held.containerId, { ...held, health, healthSinceMs: at });
  }

  /** Puts the container's entry in place of what the index held of it; none removes it. */
  private file(containerId: string, filed: IndexedBot | undefined): void {
    let bot = filed;
    const held = this.byContainer.get(containerId);
    if (held) {
      this.byContainer.delete(containerId);
      if (this.byBotId.get(held.botId)?.[0] === held) this.byBotId.delete(held.botId);
      for (const address of held.addresses) if (this.byAddress.get(address)?.[0] === held) this.byAddress.delete(address);
    }
    if (!bot) return;
    // A verdict the engine did not change keeps the time this index saw it come.
    if (held && held.health === bot.health && held.running && bot.running) bot = { ...bot, healthSinceMs: held.healthSinceMs };
    // One array per entry, made here: a look-up on a request's path allocates nothing.
    const entry = [bot] as const;
    this.byContainer.set(containerId, bot);
    this.byBotId.set(bot.botId, entry);
    for (const address of bot.addresses) this.byAddress.set(address, entry);
  }

  /** Drops the container's addresses and marks it stopped at once; its inspection that follows says the rest. */
  private forget(containerId: string): void {
    const held = this.byContainer.get(containerId);
    if (held) this.file(containerId, { ...held, running: false, addresses: [] });
  }

  private async list(): Promise<void> {
    this.listing = true;
    try {
      await this.listWhole();
    } finally {
      this.listing = false;
      // One inspection each, not another list: a burst of starts during a list would otherwise list again and again.
      const changed = this.changedWhileListing;
      this.changedWhileListing = new Set();
      for (const containerId of changed) this.inspections.track(containerId);
    }
  }

  private async listWhole(): Promise<void> {
    const listedAtMs = Date.now();
    const downSinceMs = this.stream.downSinceMs;
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: [BOT_LABEL] },
      abortSignal: AbortSignal.timeout(BACKGROUND_DEADLINE_MS),
    });
    const answeredAtMs = Date.now();
    const listing = ++this.listings;
    const known = this.byContainer;
    const restarted = this.startedSince;
    this.startedSince = new Set();
    // Each inspection waits for a slot of the queue's: a thousand at once would outlast their deadlines.
    const bots = await Promise.all(
      containers.map((container) => {
        const held = known.get(container.Id);
        // A start while the stream was down sent its event to nobody (the replay may not reach back to it):
        // the status line's uptime tells it, or does not rule it out, and the container is inspected.
        const startedAgain =
          restarted.has(container.Id) ||
          (held?.startedAt !== undefined &&
            (startedAfter(container.Status, held.startedAt, listedAtMs) || (downSinceMs !== undefined && mayHaveStartedSince(container.Status, downSinceMs, answeredAtMs))));
        return this.indexed(container, startedAgain ? undefined : held);
      }),
    );
    // A listing begun later (the stream was opened again meanwhile) is newer: this one is not filed.
    if (listing !== this.listings) return;
    this.byAddress = new Map();
    this.byBotId = new Map();
    this.byContainer = new Map();
    for (const bot of bots) if (bot) this.file(bot.containerId, bot);
    // A container removed while the stream was down sent its destroy to nobody: its death goes with the listing,
    // unless an event named it while the list was made (a container the list may predate).
    const listed = new Set(containers.map((container) => container.Id));
    for (const containerId of this.deaths.keys()) {
      if (!listed.has(containerId) && !this.changedWhileListing.has(containerId)) this.deaths.delete(containerId);
    }
  }

  /** The index entry of a listed container; undefined unless its name is its bot label. */
  private async indexed(container: ContainerInfo, known: IndexedBot | undefined): Promise<IndexedBot | undefined> {
    const botId = container.Labels[BOT_LABEL];
    if (botId === undefined || !container.Names.includes(`/${botId}`)) return undefined;
    const running = container.State === 'running';
    const addresses = running ? addressesOf(container.NetworkSettings?.Networks) : [];
    const [ownerId, template] = [container.Labels[OWNER_LABEL], container.Labels[TEMPLATE_LABEL]];
    const made = { image: container.Image, revision: revisionIn(container.Labels[REVISION_LABEL]) };
    // TTY never changes, and the start time only when the container starts: inspect
    // a container when it is new, started again, or seen running for the first time.
    const status = running ? healthInStatusLine(container.Status) : 'none';
    // A verdict the index held already keeps the time it saw it come.
    const healthSinceMs = known?.running && running && known.health === status ? known.healthSinceMs : Date.now();
    const health = { health: status, healthSinceMs, healthPolicy: healthPolicyOf(container.Labels), createdAtMs: container.Created * 1000, generation: generationIn(container.Labels[GENERATION_LABEL]) };
    if (known && (known.running || !running)) {
      return { containerId: container.Id, botId, running, ownerId, template, ...made, addresses, tty: known.tty, logPath: known.logPath, startedAt: running ? known.startedAt : undefined, ...health };
    }
    let info: ContainerInspectInfo;
    try {
      info = await this.inspections.forListing(container.Id);
    } catch (err) {
      // Removed since it was listed (its destroy event, held back while listing, says the same): not a failed list.
      if (engineStatus(err) === 404) return undefined;
      throw err;
    }
    const startedAt = running ? new Date(info.State.StartedAt) : undefined;
    return { containerId: container.Id, botId, running, ownerId, template, image: info.Config.Image, revision: made.revision, addresses, tty: info.Config.Tty, logPath: info.LogPath ?? '', startedAt, ...health };
  }
}

const NONE: readonly IndexedBot[] = Object.freeze([]);
/** The action of an event that a HEALTHCHECK's verdict changed: `health_status: unhealthy`. */
const HEALTH_STATUS = 'health_status:';

/** The addresses a container holds on its networks, IPv4 and IPv6. */
function addressesOf(networks: Record<string, { IPAddress?: string; GlobalIPv6Address?: string }> | undefined): string[] {
  return Object.values(networks ?? {})
    .flatMap((network) => [network.IPAddress, network.GlobalIPv6Address])
    .filter((address): address is string => Boolean(address));
}

/** The index entry of an inspected container; undefined unless its name is its bot label. */
function indexedFrom(info: ContainerInspectInfo): IndexedBot | undefined {
  const botId = info.Config.Labels?.[BOT_LABEL];
  if (botId === undefined || info.Name !== `/${botId}`) return undefined;
  const running = info.State.Running && !info.State.Paused;
  const addresses = running ? addressesOf(info.NetworkSettings?.Networks) : [];
  const [ownerId, template] = [info.Config.Labels?.[OWNER_LABEL], info.Config.Labels?.[TEMPLATE_LABEL]];
  const startedAt = running ? new Date(info.State.StartedAt) : undefined;
  const health = running ? healthStatusOf(info.State.Health?.Status) : 'none';
  return {
    containerId: info.Id,
    botId,
    running,
    ownerId,
    template,
    image: info.Config.Image,
    revision: revisionIn(info.Config.Labels?.[REVISION_LABEL]),
    addresses,
    tty: info.Config.Tty,
    logPath: info.LogPath ?? '',
    startedAt,
    health,
    healthSinceMs: health === 'starting' && startedAt ? startedAt.getTime() : Date.now(),
    healthPolicy: healthPolicyOf(info.Config.Labels),
    createdAtMs: Date.parse(info.Created),
    generation: generationIn(info.Config.Labels?.[GENERATION_LABEL]),
  };
}
