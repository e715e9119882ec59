import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { mkdirSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import Docker from 'dockerode';
import { BOT_LABEL, OWNER_LABEL } from '../../src/runtime/labels.js';
import { TEST_IMAGE } from './docker-fixture.js';
import { eventually } from './eventually.js';

/**
 * A Docker engine of one test file's own (its own dockerd and containerd, data, socket and network
 * namespace), which the test may stop and start again without touching the engine every other file shares.
 * Its bots run with `NetworkMode: 'none'`. The test image is copied over from the shared engine.
 */
export class PrivateEngine {
  readonly root: string;
  readonly socket: string;
  private daemon: ChildProcess | undefined;
  private startedOnce = false;

  constructor(name: string) {
    // Not under /tmp: overlayfs needs a real file system below it.
    this.root = `/var/lib/bot-agent-test-engines/${name}`;
    this.socket = `${this.root}/docker.sock`;
  }

  get dockerHost(): string {
    return `unix://${this.socket}`;
  }

  /** A client of this engine (Node's keep-alive agent: a test's own calls). */
  readonly docker = (): Docker => new Docker({ socketPath: this.socket });

  async start(): Promise<void> {
    if (!this.startedOnce) await this.leftoverGone();
    this.startedOnce = true;
    mkdirSync(`${this.root}/exec`, { recursive: true });
    const log = openSync(`${this.root}/dockerd.log`, 'a');
    // A network namespace of its own: a dockerd given no bridge deletes the host's `docker0` as a leftover,
    // which would take the shared engine's default network from every other test.
    this.daemon = spawn(
      'unshare',
      [
        '--net',
        '--',
        'dockerd',
        `--data-root=${this.root}/data`,
        `--exec-root=${this.root}/exec`,
        `--pidfile=${this.root}/dockerd.pid`,
        `--host=${this.dockerHost}`,
        '--bridge=none',
        '--iptables=false',
        '--ip-masq=false',
        '--ip-forward=false',
      ],
      { stdio: ['ignore', log, log], detached: true },
    );
    closeSync(log);
    const client = this.docker();
    if (!(await eventually(() => client.ping().then(() => true, () => false), 60_000, 100))) {
      throw new Error(`the private dockerd did not answer: ${this.logTail()}`);
    }
  }

  /** Copies the test image from the shared engine, unless it is here already. */
  async withTestImage(shared: Docker): Promise<void> {
    const here = this.docker();
    if (await here.getImage(TEST_IMAGE).inspect().then(() => true, () => false)) return;
    const progress = await here.loadImage(await shared.getImage(TEST_IMAGE).get());
    await finished(progress.resume());
  }

  /** Runs `script` in the test image as a bot of `owner` (labelled as the agent finds bots), with no network. */
  async runBot(botId: string, script: string, owner = 'user_1'): Promise<void> {
    const container = await this.docker().createContainer({
      name: botId,
      Image: TEST_IMAGE,
      Cmd: ['sh', '-c', script],
      Labels: { [BOT_LABEL]: botId, [OWNER_LABEL]: owner },
      HostConfig: { NetworkMode: 'none' },
    });
    await container.start();
  }

  /** Stops dockerd as a host's shutdown does (SIGTERM, waited for): containers without live-restore stop with it. */
  async stop(): Promise<void> {
    const daemon = this.daemon;
    this.daemon = undefined;
    if (!daemon || daemon.exitCode !== null) return;
    daemon.kill('SIGTERM');
    await once(daemon, 'exit');
  }

  /** Stops the engine, removes its containers' leftovers and its data. */
  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    this.removeData();
  }

  /** The engine an earlier run of this file left running (it was killed before its clean-up), stopped and removed. */
  private async leftoverGone(): Promise<void> {
    let pid = 0;
    try {
      pid = Number(readFileSync(`${this.root}/dockerd.pid`, 'utf8'));
    } catch {
      // None left.
    }
    if (pid > 0 && spawnSync('kill', [String(pid)]).status === 0) {
      await eventually(() => spawnSync('kill', ['-0', String(pid)]).status !== 0, 30_000, 100);
    }
    this.removeData();
  }

  private removeData(): void {
    // Mounts dockerd left (a SIGKILLed run) would keep the data from being removed.
    spawnSync('sh', ['-c', `grep -o " ${this.root}/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l`]);
    rmSync(this.root, { recursive: true, force: true });
  }

  logTail(): string {
    try {
      return readFileSync(`${this.root}/dockerd.log`, 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      return '(no log)';
    }
  }
}
