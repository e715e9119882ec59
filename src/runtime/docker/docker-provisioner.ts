import { DockerDataArchives } from './docker-archives.js';
import { DockerDataRestores } from './docker-restores.js';
import type Docker from 'dockerode';
import { AlreadyExists, messages, NotFound, OperationFailed, Unprocessable } from '../../errors.js';
import { newGeneration } from '../../bot-id.js';
import type { BotTokens } from '../../identity/bot-tokens.js';
import { BOT_CAPABILITIES, BOT_PIDS_LIMIT, botEnvironment, PLATFORM_VARIABLES, TEMPLATE_LABEL, TOKEN_VARIABLES } from '../../provisioning/bot-spec.js';
import type { BotHealthSpec, BotSpec, BotSummary, RestartPolicySpec } from '../../provisioning/bot-spec.js';
import { healthPolicyLabels, NO_HEALTH_POLICY, NO_RESTART_POLICY, restartPolicyLabels } from '../health-policy.js';
import type { MovableBot, Provisioner, PullReport, RemovedBot, RemoveOptions } from '../../provisioning/provisioner.js';
import { imageReference, registryOf } from '../../provisioning/image-reference.js';
import { checkRegistry } from '../../provisioning/registry-policy.js';
import type { RegistryLogin } from '../../provisioning/registry-credentials.js';
import { pullImage } from './docker-pull.js';
import { DEFAULT_PULL_TIMEOUT_MS } from '../pull-failure.js';
import {
  BOT_LABEL,
  GENERATION_LABEL,
  HEALTH_GRACE_LABEL,
  HEARTBEAT_TTL_LABEL,
  OWNER_LABEL,
  RESTART_BACKOFF_LABEL,
  RESTART_BACKOFF_MAX_LABEL,
  RESTART_MAX_CRASHES_LABEL,
  RESTART_WINDOW_LABEL,
  REVISION_LABEL,
  revisionIn,
} from '../labels.js';
import { DockerRevisions, healthcheckOf, PREVIOUS_SUFFIX, UNDO_SUFFIX } from './docker-revisions.js';
import { engineClients } from './docker-connection.js';
import type { EngineClients } from './docker-connection.js';
import { engineDetail, engineStatus, translateDockerError } from './docker-errors.js';
import { dataVolumesOf, prepareDataVolumes, removeVolumes } from './docker-volumes.js';

export interface DockerProvisionerOptions {
  readonly dockerHost: string;
  /** The network bots join, where the agent answers as `agent`; the engine's default when undefined. */
  readonly network: string | undefined;
  /** PLATFORM_AGENT_URL for every bot. */
  readonly agentUrl: string;
  /** Signs each bot's PLATFORM_AGENT_TOKEN; none: the bots get none. */
  readonly tokens?: BotTokens | undefined;
  /** The connections to the engine, shared with the driver; its own when none is given. */
  readonly engine?: EngineClients | undefined;
  /** Logins by registry host (AGENT_REGISTRY_AUTH), for pulls whose create brings none. */
  readonly registryLogins?: ReadonlyMap<string, RegistryLogin> | undefined;
  /** How long a pull may take (AGENT_PULL_TIMEOUT_S). */
  readonly pullTimeoutMs?: number | undefined;
  /** The registries pulls may come from (AGENT_REGISTRIES); undefined: any but loopback, private and link-local addresses. */
  readonly registries?: readonly string[] | undefined;
}

/** How long a pull may take when the options name no time. */

const DEADLINE_MS = 30_000;

/** Bots as containers named by their id, with their labels, limits, restart policy and environment. */
class DockerProvisioner implements Provisioner {
  private readonly docker: Docker;
  /** Creations, starts and removals wait for the container: see EngineClients. */
  private readonly lasting: Docker;

  readonly revisions: DockerRevisions;
  readonly dataArchives: DockerDataArchives;
  readonly dataRestores: DockerDataRestores;

  constructor(private readonly options: DockerProvisionerOptions) {
    const engine = options.engine ?? engineClients(options.dockerHost);
    this.docker = engine.docker;
    this.lasting = engine.lasting;
    this.dataArchives = new DockerDataArchives(this.lasting);
    this.dataRestores = new DockerDataRestores(this.lasting);
    this.revisions = new DockerRevisions(this.docker, this.lasting, async (image, login, pulls) => {
      if (!(await this.hasImage(image))) await this.pull(image, login, pulls);
    });
  }

  async create(spec: BotSpec, pulls?: PullReport): Promise<void> {
    await this.make(spec, { start: true, pulls });
  }

  async createStopped(spec: BotSpec, imageId: string | undefined): Promise<void> {
    await this.make(spec, { start: false, imageId });
  }

  /** Makes the bot's container (its image pulled first where missing), and starts it if asked. */
  private async make(spec: BotSpec, { start, pulls, imageId }: { start: boolean; pulls?: PullReport; imageId?: string | undefined }): Promise<void> {
    const env = { ...botEnvironment(spec, this.options.agentUrl) };
    for (const name of TOKEN_VARIABLES) env[name] = spec.token;
    // The value this bot is made with: its tokens carry it, so a bot made again under the id has others.
    const generation = newGeneration();
    if (this.options.tokens) env.PLATFORM_AGENT_TOKEN = this.options.tokens.sign(spec.id, generation);
    const options = {
      name: spec.id,
      Image: spec.image,
      Cmd: spec.command ? [...spec.command] : undefined,
      Env: Object.entries(env).map(([name, value]) => `${name}=${value}`),
      Labels: {
        [BOT_LABEL]: spec.id,
        [OWNER_LABEL]: spec.ownerId,
        [TEMPLATE_LABEL]: spec.template,
        [GENERATION_LABEL]: generation,
        [REVISION_LABEL]: String(spec.revision ?? 1),
        ...NO_HEALTH_POLICY,
        ...healthPolicyLabels(spec.health ?? {}),
        ...NO_RESTART_POLICY,
        ...restartPolicyLabels(spec.restartPolicy),
      },
      Healthcheck: healthcheckOf(spec.health),
      HostConfig: {
        NetworkMode: this.options.network,
        ExtraHosts: agentIsTheHost(this.options) ? ['agent:host-gateway'] : undefined,
        Init: spec.init === true ? true : undefined,
        RestartPolicy: { Name: 'unless-stopped' },
        Memory: spec.memoryLimitBytes,
        NanoCpus: spec.cpuLimit === undefined ? undefined : Math.round(spec.cpuLimit * 1e9),
        CapDrop: ['ALL'],
        CapAdd: [...BOT_CAPABILITIES],
        SecurityOpt: ['no-new-privileges:true'],
        PidsLimit: BOT_PIDS_LIMIT,
        // Rotated: a bot that writes without end fills 30 MB of the host's disk, no more.
        LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } },
      },
    } satisfies Docker.ContainerCreateOptions;
    // Its data volumes first (docs/api.md §19): a failed create removes those it made, never one it found.
    const volumes = await prepareDataVolumes(this.lasting, spec.id, spec.data ?? []).catch((err: unknown) => {
      throw translateDockerError(err, undefined, (detail) => new OperationFailed(`Failed to create bot ${spec.id}'s data volumes: ${detail}`));
    });
    const withData = { ...options, HostConfig: { ...options.HostConfig, Mounts: volumes.mounts.length > 0 ? volumes.mounts : undefined } };
    const made = { start, imageId };
    try {
      if ((await this.createAndStart(spec, withData, made)) === 'made') return;
      await this.pull(spec.image, spec.registryLogin, pulls);
      if ((await this.createAndStart(spec, withData, made)) === 'made') return;
      // Pulled, and gone again before the create (removed meanwhile by someone else).
      throw new Unprocessable(`image ${spec.image} is not on the engine, although it was just pulled`);
    } catch (err) {
      await removeVolumes(this.lasting, volumes.made).catch(() => undefined);
      throw err;
    }
  }

  /** Pulls the image, with the caller's login or the configured one for its registry, reporting as it goes. */
  private async pull(image: string, given: RegistryLogin | undefined, pulls: PullReport | undefined): Promise<void> {
    checkRegistry(image, this.options.registries, 'is not on the engine, and');
    const registry = registryOf(image);
    const login = given ?? this.options.registryLogins?.get(registry);
    const began = Date.now();
    let bytes = 0;
    pulls?.started(image);
    try {
      await pullImage(this.lasting, image, login, this.options.pullTimeoutMs ?? DEFAULT_PULL_TIMEOUT_MS, (progress) => {
        bytes = progress.bytes;
        pulls?.progress(image, progress);
      });
    } catch (err) {
      pulls?.ended(image, { error: err as Error });
      throw err;
    }
    pulls?.ended(image, { bytes, durationMs: Date.now() - began });
  }

  /**
   * Makes the container, and starts it if asked; 'no-image' when the engine lacks the image. With `imageId`, its image
   * must be that one (a move's copy runs the code the bot ran: docs/fleet.md). Throws AlreadyExists, Unprocessable, OperationFailed.
   */
  private async createAndStart(spec: BotSpec, options: Docker.ContainerCreateOptions, { start, imageId }: { start: boolean; imageId: string | undefined }): Promise<'made' | 'no-image'> {
    const abortSignal = AbortSignal.timeout(DEADLINE_MS);
    let container: Docker.Container | undefined;
    try {
      container = await this.lasting.createContainer({ ...options, abortSignal } as Docker.ContainerCreateOptions);
      if (imageId !== undefined) {
        const runs = (await container.inspect({ abortSignal })).Image;
        if (runs !== imageId) throw new Unprocessable(`image ${spec.image} on this node is ${runs}, not ${imageId}, the image bot ${spec.id} runs: it is not made here`);
      }
      if (start) await container.start({ abortSignal });
      return 'made';
    } catch (err) {
      // A bot that could not start is not left behind: the platform may try again under the same id.
      if (container !== undefined) await container.remove({ force: true }).catch(() => undefined);
      if (err instanceof Unprocessable) throw err;
      const status = engineStatus(err);
      if (status === 409 && container === undefined) throw new AlreadyExists(`bot ${spec.id} exists already`);
      // The engine answers 404 for a missing image and for a missing network alike: ask which.
      if (status === 404 && container === undefined && !(await this.hasImage(spec.image))) return 'no-image';
      // The engine refused what the request asked for (more CPUs than the host has, a command the image lacks).
      if (status === 400) throw new Unprocessable(`bot ${spec.id} cannot run as asked: ${engineDetail(err)}`);
      throw translateDockerError(err, undefined, (detail) => new OperationFailed(`Failed to create bot ${spec.id}: ${detail}`));
    }
  }

  private async hasImage(image: string): Promise<boolean> {
    try {
      // Listing takes a deadline; inspecting an image does not.
      const found = await this.docker.listImages({ filters: { reference: [image] }, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      return found.length > 0;
    } catch (err) {
      throw translateDockerError(err, undefined);
    }
  }

  async list(ownerId: string | undefined): Promise<BotSummary[]> {
    const labels = ownerId === undefined ? [BOT_LABEL] : [BOT_LABEL, `${OWNER_LABEL}=${ownerId}`];
    try {
      const containers = await this.docker.listContainers({ all: true, filters: { label: labels }, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      const bots = containers.filter((c) => c.Names.includes(`/${c.Labels[BOT_LABEL]}`));
      const details = await Promise.all(bots.map((c) => this.inspectIfThere(c.Id)));
      return details.filter((info) => info !== undefined).map((info) => ({
        bot_id: info.Config.Labels[BOT_LABEL] ?? '',
        user_id: info.Config.Labels[OWNER_LABEL],
        template: info.Config.Labels[TEMPLATE_LABEL],
        state: info.State.Running ? 'running' : 'stopped',
        started_at: info.State.StartedAt.startsWith('0001-') ? undefined : info.State.StartedAt,
        image: info.Config.Image,
        revision: revisionIn(info.Config.Labels[REVISION_LABEL]),
      }));
    } catch (err) {
      throw translateDockerError(err, undefined);
    }
  }

  /** A listed container, or undefined when it went away since the listing. */
  private async inspectIfThere(id: string): Promise<Docker.ContainerInspectInfo | undefined> {
    try {
      return await this.docker.getContainer(id).inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    } catch (err) {
      if (engineStatus(err) === 404) return undefined;
      throw err;
    }
  }

  async exportBot(botId: string): Promise<MovableBot> {
    try {
      const info = await this.docker.getContainer(botId).inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      const labels = info.Config.Labels ?? {};
      if (info.Name !== `/${botId}` || labels[BOT_LABEL] !== botId) throw new NotFound(messages.botNotFound(botId));
      const ownerId = labels[OWNER_LABEL];
      const template = labels[TEMPLATE_LABEL];
      if (!ownerId || !template) throw new Unprocessable(`bot ${botId} carries no owner or template label: only a bot an agent made can be moved`);
      // What the image itself sets (its variables, command and check) is left to the image on the other node: the
      // image the bot runs, which its name may no longer be.
      const runs = await this.docker.getImage(info.Image).inspect();
      const image = runs.Config;
      const imageEnv = new Set(image.Env ?? []);
      const env = Object.fromEntries(
        (info.Config.Env ?? [])
          .filter((entry) => entry.includes('=') && !imageEnv.has(entry))
          .map((entry): [string, string] => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
      );
      const extras = Object.fromEntries(Object.entries(env).filter(([name]) => !PLATFORM_VARIABLES.has(name)));
      const port = Number.parseInt(env.PORT ?? '', 10);
      const command = info.Config.Cmd && JSON.stringify(info.Config.Cmd) !== JSON.stringify(image.Cmd) ? info.Config.Cmd : undefined;
      const check = JSON.stringify(info.Config.Healthcheck) === JSON.stringify(image.Healthcheck) ? undefined : info.Config.Healthcheck;
      return {
        running: info.State.Running,
        imageId: info.Image,
        spec: {
          id: botId,
          ownerId,
          image: pinnedImage(info.Config.Image, runs.RepoDigests ?? []),
          template,
          token: env.BOT_TOKEN ?? '',
          domain: env.DOMAIN,
          port: Number.isFinite(port) ? port : undefined,
          env: extras,
          memoryLimitBytes: info.HostConfig.Memory || undefined,
          cpuLimit: info.HostConfig.NanoCpus ? info.HostConfig.NanoCpus / 1e9 : undefined,
          command,
          init: info.HostConfig.Init === true ? true : undefined,
          health: healthSpecOf(check, labels),
          restartPolicy: restartPolicySpecOf(labels),
          revision: Number.parseInt(labels[REVISION_LABEL] ?? '', 10) || 1,
          data: await this.dataOf(botId, info),
        },
      };
    } catch (err) {
      throw translateDockerError(err, botId);
    }
  }

  /** The data folders the bot's container mounts, with their size_mb (docs/api.md §19); undefined when none. */
  private async dataOf(botId: string, info: Docker.ContainerInspectInfo): Promise<BotSpec['data']> {
    const volumes = new Map((await dataVolumesOf(this.docker, botId)).map((volume) => [volume.name, volume]));
    const folders = (info.Mounts ?? []).flatMap((mount) => {
      const volume = mount.Type === 'volume' && mount.Name !== undefined ? volumes.get(mount.Name) : undefined;
      return volume === undefined ? [] : [{ path: volume.path, sizeMb: volume.sizeMb }];
    });
    return folders.length > 0 ? folders : undefined;
  }

  async remove(botId: string, { keepData = false }: RemoveOptions = {}): Promise<RemovedBot> {
    try {
      const info = await this.inspectIfThere(botId);
      if (info === undefined) {
        // No container: data kept by an earlier removal, or left by one cut short, goes now unless kept again.
        if (!keepData) await removeVolumes(this.lasting, (await dataVolumesOf(this.docker, botId)).map((volume) => volume.name));
        throw new NotFound(messages.botNotFound(botId));
      }
      if (info.Name !== `/${botId}` || info.Config.Labels?.[BOT_LABEL] !== botId) throw new NotFound(messages.botNotFound(botId));
      await this.lasting.getContainer(botId).remove({ force: true, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      // Its kept revisions go with it (docs/api.md §15).
      for (const kept of [`${botId}${PREVIOUS_SUFFIX}`, `${botId}${UNDO_SUFFIX}`]) {
        await this.lasting.getContainer(kept).remove({ force: true, abortSignal: AbortSignal.timeout(DEADLINE_MS) }).catch((err: unknown) => {
          if (engineStatus(err) !== 404) throw err;
        });
      }
      // Then its data, once nothing mounts it, unless it is to be kept (docs/api.md §19).
      const volumes = await dataVolumesOf(this.docker, botId);
      if (!keepData) await removeVolumes(this.lasting, volumes.map((volume) => volume.name));
      return { dataFolders: volumes.map((volume) => volume.path) };
    } catch (err) {
      throw translateDockerError(err, botId, (detail) => new OperationFailed(`Failed to remove bot ${botId}: ${detail}`));
    }
  }
}

/**
 * The image a bot was made from, named by the digest its registry gave it where the engine knows one for that
 * repository (`registry/name@sha256:...`), so that another node pulls that very image; else as it was named.
 */
export function pinnedImage(named: string, repoDigests: readonly string[]): string {
  const reference = imageReference(named);
  if (reference === undefined || reference.digest !== undefined) return named;
  // The engine writes its digests as familiar names (`busybox@sha256:...`): compared as parsed, one name for each spelling.
  return repoDigests.find((digest) => imageReference(digest)?.repository === reference.repository && digest.includes('@sha256:')) ?? named;
}

/** A number of whole seconds a label holds; undefined when it holds none. */
function secondsLabel(labels: Readonly<Record<string, string>>, label: string): number | undefined {
  const value = labels[label] ?? '';
  return /^\d{1,6}$/.test(value) ? Number(value) : undefined;
}

/** The health block a create made the container with (its check and the labels of its policy), the inverse of healthcheckOf. */
function healthSpecOf(check: Docker.ContainerInspectInfo['Config']['Healthcheck'] | undefined, labels: Readonly<Record<string, string>>): BotHealthSpec | undefined {
  const test = check?.Test ?? [];
  const exec = test[0] === 'CMD' ? test.slice(1) : test[0] === 'CMD-SHELL' && test[1] !== undefined ? ['/bin/sh', '-c', test[1]] : undefined;
  const heartbeatTtlS = secondsLabel(labels, HEARTBEAT_TTL_LABEL);
  if (exec === undefined && heartbeatTtlS === undefined) return undefined;
  const seconds = (ns: number | undefined, otherwise: number): number => (ns ? Math.round(ns / 1e9) : otherwise);
  return {
    exec,
    intervalS: seconds(check?.Interval, 10),
    timeoutS: seconds(check?.Timeout, 5),
    retries: check?.Retries || 3,
    startPeriodS: seconds(check?.StartPeriod, 0),
    heartbeatTtlS,
    graceS: secondsLabel(labels, HEALTH_GRACE_LABEL),
  };
}

/** The restart policy a create made the container with, from its labels. */
function restartPolicySpecOf(labels: Readonly<Record<string, string>>): RestartPolicySpec | undefined {
  const policy = {
    maxCrashes: secondsLabel(labels, RESTART_MAX_CRASHES_LABEL),
    windowS: secondsLabel(labels, RESTART_WINDOW_LABEL),
    backoffS: secondsLabel(labels, RESTART_BACKOFF_LABEL),
    backoffMaxS: secondsLabel(labels, RESTART_BACKOFF_MAX_LABEL),
  };
  return Object.values(policy).some((value) => value !== undefined) ? policy : undefined;
}

/** Provisioning on the Docker engine at DOCKER_HOST. */
export function createDockerProvisioner(options: DockerProvisionerOptions): Provisioner {
  return new DockerProvisioner(options);
}

/**
 * Whether the bots' `agent` is the host itself: on the engine's default bridge a container resolves no name but
 * its own (docs/docker.md), so `PLATFORM_AGENT_URL=http://agent:8000` reaches the agent only through an entry
 * naming the host's gateway (Engine 20.10+), where an agent run beside the engine (`npm start`) listens. On a
 * network of the operator's the agent is a container there, found by the engine's own names.
 */
function agentIsTheHost({ network, agentUrl }: Pick<DockerProvisionerOptions, 'network' | 'agentUrl'>): boolean {
  return (network === undefined || network === 'bridge') && URL.parse(agentUrl)?.hostname === 'agent';
}
