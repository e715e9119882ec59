import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { signatureOf } from '../../src/history/webhook.js';

/** One webhook delivery as a receiver got it. */
export interface Delivery {
  id: string;
  type: string;
  body: string;
  signatureOk: boolean;
}

export interface WebhookReceiver {
  server: Server;
  received: Delivery[];
  refusedCount(): number;
  url: string;
  /** Resolves, with the address of the agent that sent it, once the delivery held back (with `holdFirst`) has arrived. */
  held: Promise<string>;
}

/**
 * A webhook receiver on `host` (loopback by default) that fails its first `failures` deliveries, then keeps each one,
 * checking its signature with `secret`. With `holdFirst`, the very first delivery (or the first whose event it accepts: an engine
 * other tests share has other bots) is never answered (its sender dies meanwhile).
 */
export async function webhookReceiver(
  failures: number,
  secret: string,
  { holdFirst = false, host = '127.0.0.1' }: { holdFirst?: boolean | ((event: Record<string, unknown>) => boolean); host?: string } = {},
): Promise<WebhookReceiver> {
  const received: Delivery[] = [];
  let refused = 0;
  let holding = holdFirst !== false;
  const holds = typeof holdFirst === 'function' ? holdFirst : () => true;
  let heldArrived = (_from: string): void => {};
  const held = new Promise<string>((resolve) => {
    heldArrived = resolve;
  });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (holding && holds(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>)) {
        holding = false;
        heldArrived(req.socket.remoteAddress ?? '');
        return;
      }
      if (refused < failures) {
        refused += 1;
        res.writeHead(503).end();
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({
        id: String(req.headers['x-bot-agent-delivery']),
        type: String(req.headers['x-bot-agent-event']),
        body,
        signatureOk: req.headers['x-bot-agent-signature'] === signatureOf(body, secret),
      });
      res.writeHead(204).end();
    });
  });
  server.listen(0, host);
  await once(server, 'listening');
  return { server, received, refusedCount: () => refused, url: `http://${host}:${(server.address() as AddressInfo).port}/hook`, held };
}

/** Agents this test file started and that still run: ended with it, even when ava ends it early (SIGTERM). */
const agents = new Set<ChildProcess>();
process.once('SIGTERM', () => {
  for (const child of agents) child.kill('SIGKILL');
  process.exit(143);
});

/**
 * The agent as operators run it (src/main.ts), on a free loopback port, with `env` added to this process's.
 * `output()` is what it wrote to stdout (its log), and with `captureStderr` to stderr too.
 */
export async function runAgentProcess(
  env: Record<string, string>,
  { captureStderr = false, nodeFlags = [] }: { captureStderr?: boolean; nodeFlags?: readonly string[] } = {},
): Promise<{ process: ChildProcess; port: number; output(): string }> {
  const child = spawn(process.execPath, [...nodeFlags, '--import=tsx', 'src/main.ts'], {
    // On an engine other test files share, its watchdog restarts none of their bots, nor does it keep their lines (unless a test asks).
    env: { ...process.env, AGENT_HOST: '127.0.0.1', AGENT_PORT: '0', AGENT_WATCHDOG: 'off', AGENT_LOG_HISTORY: 'off', ...env },
    // Never this process's own stderr: that is ava's pipe, and an agent left running by a test file ava ended
    // (its timeout) would hold it open, and ava's run with it, for ever.
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  agents.add(child);
  child.once('exit', () => agents.delete(child));
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    if (captureStderr) output += chunk.toString('utf8');
    else process.stderr.write(chunk);
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const listening = /"port":(\d+)[^\n]*bot-agent listening/.exec(output);
      if (listening) resolve(Number(listening[1]));
    });
    child.once('exit', (code) => reject(new Error(`the agent exited (${code}): ${output}`)));
  });
  return { process: child, port, output: () => output };
}
