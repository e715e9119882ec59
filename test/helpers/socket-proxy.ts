import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type Mode = 'open' | 'cut' | 'stall';

/**
 * A unix socket in front of the Docker engine's, which a test can cut (every
 * connection dropped, new ones refused), stall (connections accepted, never
 * answered) and restore, without touching the engine other tests share.
 */
export class SocketProxy {
  readonly path = join(tmpdir(), `docker-proxy-${process.pid}-${Math.random().toString(36).slice(2)}.sock`);
  private mode: Mode = 'open';
  private readonly pairs = new Set<[Socket, Socket | undefined]>();
  private server: Server | undefined;

  constructor(private readonly upstream = '/var/run/docker.sock') {}

  /** DOCKER_HOST for a driver behind this proxy. */
  get dockerHost(): string {
    return `unix://${this.path}`;
  }

  async start(): Promise<void> {
    this.server = createServer((client) => this.accept(client));
    this.server.listen(this.path);
    await once(this.server, 'listening');
  }

  /** Drops every connection and refuses new ones. */
  cut(): void {
    this.mode = 'cut';
    this.dropAll();
  }

  /** Freezes every connection and accepts new ones without ever answering. */
  stall(): void {
    this.mode = 'stall';
    for (const [client, engine] of this.pairs) {
      client.unpipe();
      engine?.unpipe();
      client.pause();
      engine?.pause();
    }
  }

  /** Back to forwarding; connections frozen by a stall are dropped, as a restarted engine would. */
  restore(): void {
    this.mode = 'open';
    this.dropAll();
  }

  async close(): Promise<void> {
    this.dropAll();
    this.server?.close();
    rmSync(this.path, { force: true });
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'cut') {
      client.destroy();
      return;
    }
    const pair: [Socket, Socket | undefined] = [client, undefined];
    this.pairs.add(pair);
    client.on('close', () => {
      pair[1]?.destroy();
      this.pairs.delete(pair);
    });
    if (this.mode === 'stall') return;
    const engine = connect(this.upstream);
    pair[1] = engine;
    engine.on('error', () => client.destroy());
    engine.on('close', () => client.destroy());
    client.pipe(engine);
    engine.pipe(client);
  }

  private dropAll(): void {
    for (const [client, engine] of this.pairs) {
      client.destroy();
      engine?.destroy();
    }
    this.pairs.clear();
  }
}
