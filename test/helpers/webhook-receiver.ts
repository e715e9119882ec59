import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An event as a webhook receiver took it (docs/api.md §9): its type, and a schedule's id where it has one. */
export interface ReceivedHook {
  readonly type: string;
  readonly schedule_id?: string;
}

/** A webhook receiver on a loopback port: every event the agent posts, answered 204. */
export async function webhookReceiver(): Promise<{ url: string; received: ReceivedHook[]; close(): void }> {
  const received: ReceivedHook[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body) as ReceivedHook);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, close: () => server.close() };
}
