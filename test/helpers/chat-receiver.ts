import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { Ajv } from 'ajv';
import { discordWebhook, ntfyPublish, slackWebhook, telegramSendMessage } from '../fixtures/chat-schemas.js';

/** A chat message as the receiver took it: which service by its path's first part, and what it carried. */
export interface ReceivedChat {
  readonly chat: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
}

const chatOf = (path: string): string =>
  path.startsWith('/discord/') ? 'discord' : path.startsWith('/slack/') ? 'slack' : path.startsWith('/telegram/') ? 'telegram' : 'ntfy';

/**
 * Every chat service on one loopback port (docs/api.md §16): `/discord/…`, `/slack/…`, `/telegram/…` (the Bot
 * API), anything else ntfy; each answers as its service does. `failing` says how many more of a chat's
 * requests get 500.
 */
export async function chatReceiver(): Promise<{ url: string; received: ReceivedChat[]; failing: Map<string, number>; close(): void }> {
  const received: ReceivedChat[] = [];
  const failing = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const chat = chatOf(req.url ?? '');
      const left = failing.get(chat) ?? 0;
      if (left > 0) {
        failing.set(chat, left - 1);
        res.writeHead(500).end();
        return;
      }
      received.push({ chat, path: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
      res.writeHead(chat === 'discord' ? 204 : 200, { 'content-type': 'application/json' }).end(chat === 'telegram' ? '{"ok":true,"result":{}}' : '');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, failing, close: () => server.close() };
}

const ajv = new Ajv({ strict: false, allErrors: true });
const schemaOf = { discord: discordWebhook, slack: slackWebhook, telegram: telegramSendMessage, ntfy: ntfyPublish } as const;

/** Why the message does not match the schema its service documents; undefined when it does. */
export function chatSchemaErrors(message: ReceivedChat): string | undefined {
  return ajv.validate(schemaOf[message.chat as keyof typeof schemaOf], message.body) ? undefined : `${message.chat}: ${ajv.errorsText()}`;
}
