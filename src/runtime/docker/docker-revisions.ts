import { isDeepStrictEqual } from 'node:util';
import type Docker from 'dockerode';
import { messages, NotFound, OperationFailed, OperationInProgress, Unprocessable } from '../../errors.js';
import type { PullReport } from '../../provisioning/provisioner.js';
import { PLATFORM_VARIABLES } from '../../provisioning/bot-spec.js';
import type { BotHealthSpec } from '../../provisioning/bot-spec.js';
import type { BotChange, CandidateState, LeftDeploy, RevisionRuntime, RevisionSpec } from '../../provisioning/revisions.js';
import type { RegistryLogin } from '../../provisioning/registry-credentials.js';
import { healthPolicyLabels, NO_HEALTH_POLICY, NO_RESTART_POLICY } from '../health-policy.js';
import { BOT_LABEL, DEPLOY_DEADLINE_LABEL, REVISION_LABEL, revisionIn } from '../labels.js';
import { engineDetail, engineStatus, translateDockerError } from './docker-errors.js';
import { readLogs } from './docker-logs.js';

/** Where a deploy keeps the run it replaces while it judges the new one; also the mark that one is under way. */
export const UNDO_SUFFIX = '.undo';
/** Where the last good revision is kept, stopped, to roll back to. */
export const PREVIOUS_SUFFIX = '.previous';

const DEADLINE_MS = 30_000;
const PREFIX = 'bot-agent/';

const deployInProgress = messages.deployInProgress;

/** What the engine needs to pull an image a deploy names. */
export type EnsureImage = (image: string, login: RegistryLogin | undefined, pulls: PullReport | undefined) => Promise<void>;

/**
 * Revisions as containers (docs/api.md §15): the bot's run is the container named by its id; a deploy
 * renames it `<id>.undo` (the rename is atomic in the engine, so one deploy holds a bot at a time,
 * across agents), stops it, and makes the new run under the id. Kept: `<id>.undo` becomes `<id>.previous`;
 * undone: the new run goes and `<id>.undo` is named back and started. Every step is addressed by name,
 * so that a step that finds the names moved (another agent settled the deploy) fails instead of acting.
 */
export class DockerRevisions implements RevisionRuntime {
  constructor(
    private readonly docker: Docker,
    /** Stops, starts and creations wait for the container: the lasting pool. */
    private readonly lasting: Docker,
    private readonly ensureImage: EnsureImage,
  ) {}

  async current(botId: string): Promise<{ revision: number; spec: RevisionSpec }> {
    const info = await this.botContainer(botId);
    return { revision: revisionOf(info), spec: await this.specOf(info) };
  }

  async previous(botId: string): Promise<number | undefined> {
    const info = await this.inspect(`${botId}${PREVIOUS_SUFFIX}`);
    return info === undefined ? undefined : revisionOf(info);
  }

  async prepare(botId: string, change: BotChange, pulls?: PullReport): Promise<void> {
    await this.botContainer(botId);
    if (change.image !== undefined) await this.ensureImage(change.image, change.registryLogin, pulls);
  }

  async switchTo(botId: string, revision: number, change: BotChange, deadlineAtMs: number, pulls?: PullReport): Promise<RevisionSpec> {
    const info = await this.botContainer(botId);
    const image = change.image ?? info.Config.Image;
    if (change.image !== undefined) await this.ensureImage(image, change.registryLogin, pulls);
    const options = await this.optionsFor(botId, info, image, change, { [REVISION_LABEL]: String(revision), [DEPLOY_DEADLINE_LABEL]: String(deadlineAtMs) });
    const undoName = `${botId}${UNDO_SUFFIX}`;
    await this.step(botId, () => this.lasting.getContainer(botId).rename({ name: undoName, abortSignal: AbortSignal.timeout(DEADLINE_MS) }), true);
    try {
      await this.step(botId, () => this.stopNamed(undoName), false);
      const made = await this.lasting.createContainer({ ...options, abortSignal: AbortSignal.timeout(DEADLINE_MS) } as Docker.ContainerCreateOptions);
      try {
        await made.start({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      } catch (err) {
        await made.remove({ force: true }).catch(() => undefined);
        throw err;
      }
    } catch (err) {
      // Nothing of the new revision runs: the old run goes back under its name, and runs again.
      await this.restoreUndo(botId).catch(() => undefined);
      if (err instanceof OperationInProgress) throw err;
      if (engineStatus(err) === 400 || engineStatus(err) === 404) throw new Unprocessable(`bot ${botId} cannot run as asked: ${engineDetail(err)}`);
      throw translateDockerError(err, undefined, (detail) => new OperationFailed(`Failed to deploy bot ${botId}: ${detail}`));
    }
    const made = await this.inspect(botId);
    if (made === undefined) throw new OperationInProgress(deployInProgress(botId));
    return this.specOf(made);
  }

  async candidate(botId: string): Promise<CandidateState> {
    const info = await this.inspect(botId);
    if (info === undefined) return { exists: false, running: false, startedAtMs: undefined, restarts: 0, health: 'none', exitCode: null };
    const started = Date.parse(info.State.StartedAt);
    const health = info.State.Health?.Status;
    return {
      exists: true,
      running: info.State.Running && !info.State.Restarting,
      startedAtMs: Number.isNaN(started) || info.State.StartedAt.startsWith('0001-') ? undefined : started,
      restarts: info.RestartCount,
      health: health === 'healthy' || health === 'unhealthy' || health === 'starting' ? health : 'none',
      exitCode: info.State.Running ? null : info.State.ExitCode,
    };
  }

  async lastLines(botId: string, lines: number): Promise<string> {
    const info = await this.inspect(botId);
    if (info === undefined) return '';
    return readLogs(this.docker, info.Id, info.Config.Tty, lines).catch(() => '');
  }

  async keep(botId: string): Promise<void> {
    const previous = await this.inspect(`${botId}${PREVIOUS_SUFFIX}`);
    if (previous !== undefined) await this.lasting.getContainer(previous.Id).remove({ force: true, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    await this.step(botId, () => this.lasting.getContainer(`${botId}${UNDO_SUFFIX}`).rename({ name: `${botId}${PREVIOUS_SUFFIX}`, abortSignal: AbortSignal.timeout(DEADLINE_MS) }), false);
  }

  async undo(botId: string): Promise<void> {
    const undo = await this.inspect(`${botId}${UNDO_SUFFIX}`);
    if (undo === undefined) throw new OperationInProgress(deployInProgress(botId));
    const candidate = await this.inspect(botId);
    if (candidate !== undefined && candidate.Id !== undo.Id) {
      // By its id: the name may be the old run's again by now, if another agent settled the deploy meanwhile.
      await this.stopId(candidate.Id);
      await this.lasting.getContainer(candidate.Id).remove({ force: true, abortSignal: AbortSignal.timeout(DEADLINE_MS) }).catch((err: unknown) => {
        if (engineStatus(err) !== 404) throw err;
      });
    }
    await this.restoreUndo(botId);
  }

  async rollBack(botId: string): Promise<{ from: number; to: number }> {
    const previous = await this.inspect(`${botId}${PREVIOUS_SUFFIX}`);
    if (previous === undefined) throw new NotFound(`no previous revision: bot ${botId} has none kept to roll back to`);
    const current = await this.botContainer(botId);
    const undoName = `${botId}${UNDO_SUFFIX}`;
    await this.step(botId, () => this.lasting.getContainer(botId).rename({ name: undoName, abortSignal: AbortSignal.timeout(DEADLINE_MS) }), true);
    try {
      await this.step(botId, () => this.stopNamed(undoName), false);
      await this.step(botId, () => this.lasting.getContainer(previous.Id).rename({ name: botId, abortSignal: AbortSignal.timeout(DEADLINE_MS) }), false);
    } catch (err) {
      await this.restoreUndo(botId).catch(() => undefined);
      throw err;
    }
    await this.finishRollback(botId);
    return { from: revisionOf(current), to: revisionOf(previous) };
  }

  async leftDeploys(): Promise<LeftDeploy[]> {
    const listed = await this.docker
      .listContainers({ all: true, filters: { label: [BOT_LABEL] }, abortSignal: AbortSignal.timeout(DEADLINE_MS) })
      .catch((err: unknown) => {
        throw translateDockerError(err, undefined);
      });
    const left: LeftDeploy[] = [];
    for (const container of listed) {
      const botId = container.Labels[BOT_LABEL];
      if (botId === undefined || !container.Names.includes(`/${botId}${UNDO_SUFFIX}`)) continue;
      const candidate = await this.inspect(botId);
      const deadline = Number(candidate?.Config.Labels?.[DEPLOY_DEADLINE_LABEL]);
      left.push({
        botId,
        from: revisionOfLabels(container.Labels),
        to: candidate === undefined ? undefined : revisionOf(candidate),
        deadlineAtMs: Number.isFinite(deadline) && deadline > 0 ? deadline : undefined,
      });
    }
    return left;
  }

  async settle(left: LeftDeploy): Promise<void> {
    // A rollback goes back to an older revision: it is finished. A deploy (or one whose run was never made) is undone.
    if (left.to !== undefined && left.to < left.from) await this.finishRollback(left.botId);
    else await this.undo(left.botId);
  }

  /** The rollback's last steps: the one it replaced stopped, the revision rolled back to started, the replaced one kept as the previous. */
  private async finishRollback(botId: string): Promise<void> {
    await this.stopNamed(`${botId}${UNDO_SUFFIX}`);
    await this.lasting.getContainer(botId).start({ abortSignal: AbortSignal.timeout(DEADLINE_MS) }).catch((err: unknown) => {
      if (engineStatus(err) !== 304) throw translateDockerError(err, botId);
    });
    await this.step(botId, () => this.lasting.getContainer(`${botId}${UNDO_SUFFIX}`).rename({ name: `${botId}${PREVIOUS_SUFFIX}`, abortSignal: AbortSignal.timeout(DEADLINE_MS) }), false);
  }

  /**
   * `<id>.undo` started, then named back to the bot's id: cut off between the two, it runs under `<id>.undo`,
   * which the next agent finds and names back; never a bot stopped under its own name, which none would find.
   */
  private async restoreUndo(botId: string): Promise<void> {
    const undoName = `${botId}${UNDO_SUFFIX}`;
    await this.lasting.getContainer(undoName).start({ abortSignal: AbortSignal.timeout(DEADLINE_MS) }).catch((err: unknown) => {
      if (engineStatus(err) === 404) throw new OperationInProgress(deployInProgress(botId));
      if (engineStatus(err) !== 304) throw translateDockerError(err, botId);
    });
    await this.step(botId, () => this.lasting.getContainer(undoName).rename({ name: botId, abortSignal: AbortSignal.timeout(DEADLINE_MS) }), false);
  }

  /**
   * One renaming or stopping step. A name taken (409) means another deploy holds the bot; a name gone (404)
   * that another agent settled it meanwhile: either way this deploy stops here, as in progress elsewhere.
   */
  private async step(botId: string, act: () => Promise<unknown>, first: boolean): Promise<void> {
    try {
      await act();
    } catch (err) {
      const status = engineStatus(err);
      // The first step's name gone: renamed by another agent's deploy a moment ago, or the bot removed.
      const taken = status === 404 && first && (await this.inspect(`${botId}${UNDO_SUFFIX}`)) !== undefined;
      // Two renames of one container to one name at once: the later finds it named so already.
      const raced = /same name as its current name/.test(engineDetail(err));
      if (status === 409 || (status === 404 && !first) || taken || raced) throw new OperationInProgress(deployInProgress(botId));
      throw translateDockerError(err, botId);
    }
  }

  private async stopNamed(name: string): Promise<void> {
    const info = await this.inspect(name);
    if (info === undefined) throw Object.assign(new Error(`no container ${name}`), { statusCode: 404 });
    await this.lasting.getContainer(name).stop({ abortSignal: AbortSignal.timeout(stopDeadlineOf(info)) }).catch((err: unknown) => {
      if (engineStatus(err) !== 304) throw err;
    });
  }

  private async stopId(id: string): Promise<void> {
    await this.lasting.getContainer(id).stop({ t: 10, abortSignal: AbortSignal.timeout(DEADLINE_MS) }).catch((err: unknown) => {
      if (engineStatus(err) !== 304 && engineStatus(err) !== 404) throw err;
    });
  }

  private async botContainer(botId: string): Promise<Docker.ContainerInspectInfo> {
    const info = await this.inspect(botId);
    if (info === undefined || info.Config.Labels?.[BOT_LABEL] !== botId) {
      // The id's name is `<id>.undo` while a deploy holds it.
      if (await this.inspect(`${botId}${UNDO_SUFFIX}`)) throw new OperationInProgress(deployInProgress(botId));
      throw new NotFound(messages.botNotFound(botId));
    }
    return info;
  }

  private async inspect(name: string): Promise<Docker.ContainerInspectInfo | undefined> {
    try {
      const info = await this.docker.getContainer(name).inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      return info.Name === `/${name}` ? info : undefined;
    } catch (err) {
      if (engineStatus(err) === 404) return undefined;
      throw translateDockerError(err, undefined);
    }
  }

  /** The image's own config: what of a container's config came from its image, not from its creator. */
  private async imageConfig(imageId: string): Promise<Docker.ImageInspectInfo['Config'] | undefined> {
    return this.docker
      .getImage(imageId)
      .inspect()
      .then((image) => image.Config)
      .catch(() => undefined);
  }

  /**
   * The new run's create options: the old run's, less what its image gave it (an image's ENV, CMD and
   * HEALTHCHECK are the new image's to give), with the change on top and the deploy's labels.
   */
  private async optionsFor(
    botId: string,
    info: Docker.ContainerInspectInfo,
    image: string,
    change: BotChange,
    deployLabels: Record<string, string>,
  ): Promise<Docker.ContainerCreateOptions> {
    const own = await this.imageConfig(info.Image);
    const imageEnv = new Set(own?.Env ?? []);
    const env = new Map((info.Config.Env ?? []).filter((entry) => !imageEnv.has(entry)).map((entry) => splitEntry(entry)));
    for (const [name, value] of Object.entries(change.env ?? {})) env.set(name, value);
    const fromImage = (value: unknown, imageValue: unknown): boolean => own !== undefined && isDeepStrictEqual(value ?? null, imageValue ?? null);
    const labels = Object.fromEntries(Object.entries(info.Config.Labels ?? {}).filter(([name]) => name.startsWith(PREFIX)));
    const health = change.health === undefined ? {} : { ...NO_HEALTH_POLICY, ...healthPolicyLabels(change.health) };
    const config = info.Config as Docker.ContainerInspectInfo['Config'] & { Healthcheck?: unknown; StopTimeout?: number; StopSignal?: string };
    return {
      name: botId,
      Image: image,
      Env: [...env].map(([name, value]) => `${name}=${value}`),
      Cmd: change.command ? [...change.command] : fromImage(config.Cmd, own?.Cmd) ? undefined : config.Cmd,
      Entrypoint: fromImage(config.Entrypoint, own?.Entrypoint) ? undefined : config.Entrypoint,
      Healthcheck: (change.health !== undefined
        ? healthcheckOf(change.health)
        : fromImage(config.Healthcheck, (own as { Healthcheck?: unknown } | undefined)?.Healthcheck)
          ? undefined
          : config.Healthcheck) as Docker.ContainerCreateOptions['Healthcheck'],
      // The new image's own labels of the policies' names say nothing (docs/api.md §13): what the bot had stays.
      Labels: { ...NO_HEALTH_POLICY, ...NO_RESTART_POLICY, ...labels, ...health, ...deployLabels },
      User: config.User || undefined,
      WorkingDir: config.WorkingDir || undefined,
      Tty: config.Tty,
      OpenStdin: config.OpenStdin,
      StopSignal: config.StopSignal || undefined,
      StopTimeout: config.StopTimeout,
      HostConfig: {
        ...info.HostConfig,
        Memory: change.memoryLimitBytes ?? info.HostConfig.Memory,
        NanoCpus: change.cpuLimit === undefined ? info.HostConfig.NanoCpus : Math.round(change.cpuLimit * 1e9),
      },
    };
  }

  /** What a container runs, as its revision's record shows it. */
  private async specOf(info: Docker.ContainerInspectInfo): Promise<RevisionSpec> {
    const own = await this.imageConfig(info.Image);
    const imageEnv = new Set(own?.Env ?? []);
    // The extra variables: neither the image's own nor the platform's (docs/api.md §6).
    const names = (info.Config.Env ?? [])
      .filter((entry) => !imageEnv.has(entry))
      .map((entry) => splitEntry(entry)[0])
      .filter((name) => !PLATFORM_VARIABLES.has(name));
    const health = (info.Config as { Healthcheck?: { Test?: string[] } }).Healthcheck?.Test;
    const memory = info.HostConfig.Memory;
    const cpus = info.HostConfig.NanoCpus;
    return {
      image: info.Config.Image,
      command: info.Config.Cmd ?? null,
      env: names.sort(),
      memory_limit: memory ? memory : null,
      cpu_limit: cpus ? cpus / 1e9 : null,
      health: health && health[0] === 'CMD' ? { exec: health.slice(1) } : null,
    };
  }
}

function splitEntry(entry: string): [string, string] {
  const at = entry.indexOf('=');
  return at < 0 ? [entry, ''] : [entry.slice(0, at), entry.slice(at + 1)];
}

function revisionOfLabels(labels: Readonly<Record<string, string>> | undefined): number {
  return revisionIn(labels?.[REVISION_LABEL]);
}

function revisionOf(info: Docker.ContainerInspectInfo): number {
  return revisionOfLabels(info.Config.Labels);
}

/** A stop's own deadline: the container's grace period, and time to spare. */
function stopDeadlineOf(info: Docker.ContainerInspectInfo): number {
  const grace = (info.Config as { StopTimeout?: number }).StopTimeout ?? 10;
  return (grace + 20) * 1000;
}

/** Docker's Healthcheck for a create's exec check (its times in nanoseconds); undefined: the image's own. */
export function healthcheckOf(health: BotHealthSpec | undefined): Docker.ContainerCreateOptions['Healthcheck'] {
  if (health?.exec === undefined) return undefined;
  const ns = (seconds: number): number => seconds * 1e9;
  return {
    Test: ['CMD', ...health.exec],
    Interval: ns(health.intervalS),
    Timeout: ns(health.timeoutS),
    Retries: health.retries,
    StartPeriod: ns(health.startPeriodS),
  };
}
