import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';

interface Link {
  /** Drops what either side sends, without a word. */
  cut: boolean;
  readonly client: Socket;
  readonly upstream: Socket;
}

/**
 * A TCP relay to `target` that a test can fail as networks and hosts fail:
 * `cut()` makes every connection open now drop what either side sends, with no
 * FIN and no RST (a host gone, an idle time-out on the way), while new ones pass;
 * `freeze()` holds everything, on every connection old and new, until `thaw()`
 * delivers it (a server stopped with SIGSTOP, as its callers see it).
 */
export class TcpRelay {
  private readonly server: Server;
  private readonly links = new Set<Link>();
  private frozen = false;
  private held: Array<() => void> = [];

  constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => {
      const upstream = createConnection(this.target);
      const link: Link = { cut: false, client, upstream };
      this.links.add(link);
      const relay = (to: Socket) => (chunk: Buffer) => {
        if (link.cut) return;
        if (this.frozen) this.held.push(() => link.cut || to.write(chunk));
        else to.write(chunk);
      };
      client.on('data', relay(upstream));
      upstream.on('data', relay(client));
      const close = (): void => {
        if (link.cut) return;
        this.links.delete(link);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
  }

  async start(): Promise<number> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return (this.server.address() as AddressInfo).port;
  }

  cut(): void {
    for (const link of this.links) link.cut = true;
  }

  freeze(): void {
    this.frozen = true;
  }

  thaw(): void {
    this.frozen = false;
    for (const deliver of this.held.splice(0)) deliver();
  }

  async close(): Promise<void> {
    for (const link of this.links) {
      link.client.destroy();
      link.upstream.destroy();
    }
    this.server.close();
  }
}
