import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import type { Container } from 'dockerode';
import { loadConfig } from '../../src/config.js';
import { dockerConnection } from '../../src/runtime/docker/docker-connection.js';
import { demuxed } from '../../src/runtime/docker/docker-log-frames.js';
import { BOT_LABEL, OWNER_LABEL } from '../../src/runtime/labels.js';
import { NC_SCRIPT, parseRawReply, rawRequest } from './raw-http.js';
import type { RawReply } from './raw-http.js';

/** The busybox image `scripts/docker-engine.sh --test-image` makes locally. */
export const TEST_IMAGE = 'bot-agent-testbot:latest';

/** A bot that saves its state and exits at once on SIGTERM, and otherwise idles. */
export const IDLE_BOT = "trap 'echo saved state; exit 0' TERM; while :; do sleep 1 & wait $!; done";

export interface BotSpec {
  /** Shell script the container runs (busybox sh). */
  script?: string;
  /** Arguments the script sees as $1, $2, ... */
  args?: string[];
  owner?: string;
  tty?: boolean;
  /** Seconds the engine waits after SIGTERM before SIGKILL. */
  stopTimeout?: number;
  /** False: a container named like a bot but without the bot label. */
  labelled?: boolean;
  /** Start the container (default true). */
  start?: boolean;
  /** A CPU quota in cores. */
  cpus?: number;
  /** A memory limit in bytes (swap included). */
  memoryBytes?: number;
  /** The engine's restart policy, e.g. `on-failure` or `unless-stopped`. */
  restartPolicy?: string;
  /** The bot id to use again (a bot recreated); a fresh one by default. */
  id?: string;
  /** A HEALTHCHECK: a shell command, run every second, unhealthy after two failures. */
  healthcheck?: string;
  /** The image (TEST_IMAGE by default). */
  image?: string;
  /** Further labels (e.g. the watchdog's grace). */
  labels?: Record<string, string>;
  /** The engine's log driver (json-file by default): `local` keeps no file the agent reads, so its logs reads ask the engine. */
  logDriver?: string;
}

export interface TestBot {
  id: string;
  container: Container;
}

/**
 * Real containers and a network on the real engine for one test file, all
 * marked with the file's run id and removed by `cleanup`.
 */
export class DockerFixture {
  readonly docker = new Docker(dockerConnection(loadConfig().dockerHost));
  readonly dockerHost = loadConfig().dockerHost;
  readonly runId = randomBytes(4).toString('hex');
  private count = 0;
  private networkMade: Promise<{ name: string; gateway: string }> | undefined;

  /** Fails with one clear line when no engine or no test image can be had. */
  async ready(): Promise<void> {
    try {
      await this.docker.ping();
    } catch (err) {
      throw new Error(
        `Docker engine not reachable at ${this.dockerHost} (${(err as Error).message}); ` +
          'run `bash scripts/docker-engine.sh --test-image` as root (npm test does)',
      );
    }
    try {
      await this.docker.getImage(TEST_IMAGE).inspect();
    } catch {
      throw new Error(`test image ${TEST_IMAGE} missing; run \`bash scripts/docker-engine.sh --test-image\``);
    }
  }

  /** The file's own network, created once on first use; its gateway is this machine. */
  network(): Promise<{ name: string; gateway: string }> {
    this.networkMade ??= this.createNetwork();
    return this.networkMade;
  }

  private async createNetwork(): Promise<{ name: string; gateway: string }> {
    const name = `bot-agent-test-${this.runId}`;
    const network = await this.docker.createNetwork({ Name: name, Labels: { 'bot-agent-test': this.runId } });
    const info = (await network.inspect()) as { IPAM?: { Config?: Array<{ Gateway?: string }> } };
    const gateway = info.IPAM?.Config?.[0]?.Gateway;
    if (!gateway) throw new Error(`network ${name} has no gateway`);
    return { name, gateway };
  }

  /** A fresh bot id of the contract's shape. */
  newBotId(): string {
    this.count += 1;
    return `bot_${process.pid}_${this.count}_${this.runId}`;
  }

  /** Creates (and by default starts) a bot container on the file's network. */
  async runBot(spec: BotSpec = {}): Promise<TestBot> {
    const id = spec.id ?? this.newBotId();
    const labels: Record<string, string> = { ...spec.labels, 'bot-agent-test': this.runId, [OWNER_LABEL]: spec.owner ?? 'user_1' };
    if (spec.labelled !== false) labels[BOT_LABEL] = id;
    const container = await this.docker.createContainer({
      name: id,
      Image: spec.image ?? TEST_IMAGE,
      Cmd: ['sh', '-c', spec.script ?? IDLE_BOT, 'sh', ...(spec.args ?? [])],
      Tty: spec.tty ?? false,
      Labels: labels,
      StopTimeout: spec.stopTimeout,
      Healthcheck: spec.healthcheck === undefined ? undefined : { Test: ['CMD-SHELL', spec.healthcheck], Interval: 1e9, Timeout: 1e9, Retries: 2 },
      HostConfig: {
        NetworkMode: (await this.network()).name,
        NanoCpus: spec.cpus === undefined ? undefined : Math.round(spec.cpus * 1e9),
        Memory: spec.memoryBytes,
        MemorySwap: spec.memoryBytes,
        RestartPolicy: spec.restartPolicy ? { Name: spec.restartPolicy } : undefined,
        LogConfig: spec.logDriver ? { Type: spec.logDriver, Config: {} } : undefined,
      },
    });
    if (spec.start !== false) await container.start();
    return { id, container };
  }

  async startedAt(bot: TestBot): Promise<string> {
    return (await bot.container.inspect()).State.StartedAt;
  }

  async running(bot: TestBot): Promise<boolean> {
    return (await bot.container.inspect()).State.Running;
  }

  /** Runs a shell script inside the bot's container, with extra environment, and returns what it printed. */
  async exec(bot: TestBot, script: string, env: Record<string, string> = {}): Promise<string> {
    const exec = await bot.container.exec({
      Cmd: ['sh', '-c', script],
      Env: Object.entries(env).map(([name, value]) => `${name}=${value}`),
      AttachStdout: true,
      AttachStderr: true,
    });
    const stream = await exec.start({ hijack: true, stdin: false });
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    await new Promise((resolve) => {
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', resolve);
    });
    return demuxed(Buffer.concat(chunks)).toString('utf8');
  }

  /**
   * An HTTP/1.0 call made from inside the bot's container with busybox nc,
   * so that the agent sees the container's own address.
   */
  async httpFromBot(
    bot: TestBot,
    target: { host: string; port: number },
    request: { method: string; path: string; headers?: Record<string, string>; body?: unknown },
  ): Promise<RawReply> {
    const raw = await this.exec(bot, NC_SCRIPT, {
      REQUEST: rawRequest(request),
      AGENT_HOST: target.host,
      AGENT_PORT: String(target.port),
    });
    return parseRawReply(raw);
  }

  /** How many times the engine restarted the bot's container since `since` (unix seconds). */
  async restartEvents(bot: TestBot, since: number): Promise<number> {
    const until = Math.ceil(Date.now() / 1000) + 1;
    const stream = (await this.docker.getEvents({
      since,
      until,
      filters: { container: [bot.id], event: ['restart'] },
    })) as NodeJS.ReadableStream;
    let text = '';
    for await (const chunk of stream) text += chunk.toString();
    return text.split('\n').filter((line) => line.includes('"restart"')).length;
  }

  /**
   * Removes every container and the network this file made: also the containers on that network the file made
   * otherwise (bots created through an agent's provisioning carry no test label), which would keep the network.
   */
  async cleanup(): Promise<void> {
    const mine = await this.docker.listContainers({ all: true, filters: { label: [`bot-agent-test=${this.runId}`] } });
    const network = this.networkMade === undefined ? undefined : (await this.networkMade).name;
    const onNetwork = network === undefined ? [] : await this.docker.listContainers({ all: true, filters: { network: [network] } }).catch(() => []);
    const ids = new Set([...mine, ...onNetwork].map((c) => c.Id));
    await Promise.all([...ids].map((id) => this.docker.getContainer(id).remove({ force: true }).catch(() => undefined)));
    if (network !== undefined) await this.docker.getNetwork(network).remove().catch(() => undefined);
  }
}
