import Docker from 'dockerode';
import type { ContainerInfo, ContainerInspectInfo } from 'dockerode';
import { messages, NotFound, NotRunning, OperationFailed } from '../../errors.js';
import type { BotInfo, BotStats, PowerOutcome, RuntimeDriver } from '../driver.js';
import { BOT_LABEL, OWNER_LABEL } from '../labels.js';
import { isLoopback } from '../../loopback.js';
import { DockerBotIndex } from './docker-bot-index.js';
import { readCgroup, statsBetween } from './docker-cgroup.js';
import { dockerConnection } from './docker-connection.js';
import { translateDockerError } from './docker-errors.js';
import { logText } from './docker-logs.js';
import { DockerStatsFeed } from './docker-stats-feed.js';
import { botStatsFrom } from './docker-stats.js';

/** The interval a first stats read measures, as `docker stats` does. */
const COLD_INTERVAL_MS = 1_000;

/** A bot is the container named by its id that carries the bot label with that id. */
class DockerDriver implements RuntimeDriver {
  readonly runtime = 'docker';
  private readonly index: DockerBotIndex;
  private readonly statsFeed: DockerStatsFeed;

  constructor(private readonly docker: Docker) {
    this.index = new DockerBotIndex(docker);
    this.statsFeed = new DockerStatsFeed(docker);
  }

  async ping(): Promise<void> {
    await this.engine(undefined, () => this.docker.ping());
  }

  async findBot(botId: string): Promise<BotInfo> {
    const info = await this.inspectBot(botId);
    return { id: botId, ownerId: info.Config.Labels?.[OWNER_LABEL], running: info.State.Running };
  }

  async botAtAddress(address: string): Promise<string | undefined> {
    const indexed = this.index.botAt(address);
    if (indexed) return indexed.botId;
    // No container holds a loopback address; any other miss may be a container the index has not seen yet.
    if (indexed === undefined && isLoopback(address)) return undefined;
    const running = await this.engine(undefined, () =>
      this.docker.listContainers({ filters: { label: [BOT_LABEL], status: ['running'] } }),
    );
    const holder = running.find((container) => holdsAddress(container, address));
    const botId = holder?.Labels[BOT_LABEL];
    return botId !== undefined && holder?.Names.includes(`/${botId}`) ? botId : undefined;
  }

  async restart(botId: string): Promise<void> {
    await this.runningBot(botId);
    // Without `t` the engine waits the container's own StopTimeout (else 10 s) before it kills.
    await this.engine(
      botId,
      () => this.docker.getContainer(botId).restart(),
      (detail) => new OperationFailed(messages.restartFailed(botId, detail)),
    );
  }

  async stop(botId: string): Promise<PowerOutcome> {
    const info = await this.inspectBot(botId);
    if (!info.State.Running) return 'already';
    return this.power(botId, 'stop', () => this.docker.getContainer(botId).stop());
  }

  async start(botId: string): Promise<PowerOutcome> {
    const info = await this.inspectBot(botId);
    if (info.State.Running) return 'already';
    return this.power(botId, 'start', () => this.docker.getContainer(botId).start());
  }

  async logs(botId: string, lines: number): Promise<string> {
    const indexed = this.index.bot(botId);
    const { containerId, tty } = indexed
      ? indexed
      : await this.inspectBot(botId).then((info) => ({ containerId: info.Id, tty: info.Config.Tty }));
    const raw = await this.engine(botId, () =>
      this.docker.getContainer(containerId).logs({ stdout: true, stderr: true, tail: lines, follow: false }),
    );
    return logText(this.docker, raw, tty);
  }

  async stats(botId: string): Promise<BotStats> {
    const info = await this.runningBot(botId);
    const startedAt = new Date(info.State.StartedAt);
    const latest = this.statsFeed.latest(info.Id);
    if (latest) return botStatsFrom(latest, startedAt);
    // A first read: where the host's cgroup files are visible, measure one second
    // of them while the engine's stream warms up for the reads that follow.
    const before = await readCgroup(info.Id);
    if (before) {
      this.statsFeed.warm(info.Id);
      await new Promise((resolve) => setTimeout(resolve, COLD_INTERVAL_MS));
      const after = await readCgroup(info.Id);
      if (after) return statsBetween(before, after, startedAt);
    }
    try {
      return botStatsFrom(await this.statsFeed.sample(info.Id), startedAt);
    } catch (err) {
      // The stream ends when the container goes away: tell that apart from an engine failure.
      if ((err as { statusCode?: number }).statusCode === undefined) await this.runningBot(botId);
      throw translateDockerError(err, botId);
    }
  }

  async close(): Promise<void> {
    this.index.close();
    this.statsFeed.close();
  }

  private async inspectBot(botId: string): Promise<ContainerInspectInfo> {
    const info = await this.engine(botId, () => this.docker.getContainer(botId).inspect());
    // The engine also resolves id prefixes; the agent never touches an unlabelled container.
    if (info.Name !== `/${botId}` || info.Config.Labels?.[BOT_LABEL] !== botId) {
      throw new NotFound(messages.botNotFound(botId));
    }
    return info;
  }

  private async runningBot(botId: string): Promise<ContainerInspectInfo> {
    const info = await this.inspectBot(botId);
    if (!info.State.Running) throw new NotRunning(messages.notRunning(botId));
    return info;
  }

  /** Stop or start; the engine's 304 means another caller got there first. */
  private async power(botId: string, verb: string, call: () => Promise<unknown>): Promise<PowerOutcome> {
    try {
      await call();
      return 'done';
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 304) return 'already';
      throw translateDockerError(err, botId, (detail) => new OperationFailed(`Failed to ${verb} bot ${botId}: ${detail}`));
    }
  }

  private async engine<T>(
    botId: string | undefined,
    call: () => Promise<T>,
    failed?: (detail: string) => OperationFailed,
  ): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw translateDockerError(err, botId, failed ?? ((detail) => new OperationFailed(`Docker engine error: ${detail}`)));
    }
  }
}

function holdsAddress(container: ContainerInfo, address: string): boolean {
  return Object.values(container.NetworkSettings?.Networks ?? {}).some(
    (network) => network.IPAddress === address || network.GlobalIPv6Address === address,
  );
}

/** The Docker driver, talking to the engine at DOCKER_HOST. */
export function createDockerDriver(options: { dockerHost: string }): RuntimeDriver {
  return new DockerDriver(new Docker(dockerConnection(options.dockerHost)));
}

