import type { PendingDelivery } from '../history/history-store.js';
import { postWithin } from '../history/webhook.js';
import type { DeliveryTarget } from '../history/webhook.js';
import { discordMessage, noteOf, ntfyMessage, slackMessage, telegramMessage } from './chat-messages.js';
import type { ChatConfig, ChatNote, ChatRequest } from './chat-messages.js';

export type { ChatConfig } from './chat-messages.js';

/** One chat: its name, and the request that tells it a note. */
interface Chat {
  readonly name: string;
  readonly request: (note: ChatNote) => ChatRequest;
}

function chatsOf(config: ChatConfig): Chat[] {
  const chats: Chat[] = [];
  const { discordUrl, slackUrl, telegram, ntfy } = config;
  if (discordUrl) chats.push({ name: 'discord', request: (note) => discordMessage(discordUrl, note) });
  if (slackUrl) chats.push({ name: 'slack', request: (note) => slackMessage(slackUrl, note) });
  if (telegram) chats.push({ name: 'telegram', request: (note) => telegramMessage(telegram.api, telegram.token, telegram.chatId, note) });
  if (ntfy) chats.push({ name: 'ntfy', request: (note) => ntfyMessage(ntfy.url, ntfy.token, note) });
  return chats;
}

/**
 * Each configured chat as a delivery target of the events `config.events` names; `prefix` sets a bot's own
 * chats apart from the agent's in a delivery's record of the targets it reached.
 */
export function chatTargets(config: ChatConfig, prefix = ''): DeliveryTarget[] {
  const told = new Set(config.events);
  return chatsOf(config).map((chat) => ({
    name: `${prefix}${chat.name}`,
    wants: (type) => told.has(type),
    async send(delivery: PendingDelivery) {
      const request = chat.request(noteOf(JSON.parse(delivery.data) as Record<string, unknown>, config.consoleUrl));
      await postWithin(request.url, request.headers, request.body);
    },
  }));
}

/**
 * A test message to every chat of `config`, now: which answered 2xx, and why the others did not (never a secret).
 * `botId`: the chats are that bot's own, and the message says so.
 */
export async function testChats(config: ChatConfig, botId?: string): Promise<{ target: string; ok: boolean; error?: string }[]> {
  const told = botId === undefined ? 'the bots' : `bot ${botId}`;
  const note = noteOf({ bot_id: botId ?? 'bot-agent', type: 'test', at: new Date().toISOString(), message: `This chat will be told what happens to ${told} (docs/api.md §16).` }, config.consoleUrl);
  return Promise.all(
    chatsOf(config).map(async (chat) => {
      const request = chat.request({ ...note, title: 'bot-agent: a test message', link: config.consoleUrl });
      try {
        await postWithin(request.url, request.headers, request.body);
        return { target: chat.name, ok: true };
      } catch (err) {
        return { target: chat.name, ok: false, error: (err as Error).message };
      }
    }),
  );
}
