import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';

/**
 * A TCP relay to `target` whose connections can be cut silently: `cut()` makes
 * every connection open now drop what either side sends, with no FIN and no RST,
 * as a host gone or an idle time-out on the way does; connections made after it
 * pass as before.
 */
export class TcpBlackhole {
  private readonly server: Server;
  private readonly open = new Set<{ cut: boolean; sockets: Socket[] }>();

  constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => {
      const upstream = createConnection(this.target);
      const link = { cut: false, sockets: [client, upstream] };
      this.open.add(link);
      client.on('data', (chunk) => link.cut || upstream.write(chunk));
      upstream.on('data', (chunk) => link.cut || client.write(chunk));
      const close = (): void => {
        if (link.cut) return;
        this.open.delete(link);
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
    for (const link of this.open) link.cut = true;
  }

  async close(): Promise<void> {
    for (const link of this.open) for (const socket of link.sockets) socket.destroy();
    this.server.close();
  }
}
