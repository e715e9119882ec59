/**
 * An event told in a chat (docs/api.md §16): what happened to which bot, why, its last lines and a link to
 * its console page, in each service's own message format and within each service's documented limits.
 */

export { CHAT_EVENTS } from '../config.js';
export type { ChatConfig } from '../config.js';

/** What a chat message says, built once from an event. */
export interface ChatNote {
  readonly botId: string;
  readonly type: string;
  /** One line: the bot and what happened. */
  readonly title: string;
  /** Why, in a sentence or two; empty when the event says no more. */
  readonly detail: string;
  /** The last lines the event carries (a failed deploy's, an exit's), or empty. */
  readonly lines: string;
  /** The bot's console page, when AGENT_CONSOLE_URL is set. */
  readonly link: string | undefined;
  readonly at: string;
  /** Whether the owner must act (red) or it is good news (green). */
  readonly severity: 'bad' | 'good' | 'info';
}

/** An HTTP request to a chat service. */
export interface ChatRequest {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

const WHAT: Record<string, { readonly text: string; readonly severity: ChatNote['severity'] }> = {
  'crash-looping': { text: 'is crash-looping', severity: 'bad' },
  unhealthy: { text: 'turned unhealthy', severity: 'bad' },
  restarted: { text: 'was restarted for its health', severity: 'bad' },
  'deploy-failed': { text: 'failed its deploy', severity: 'bad' },
  'rolled-back': { text: 'was rolled back', severity: 'info' },
  'deploy-succeeded': { text: 'was deployed', severity: 'good' },
  'pull-failed': { text: 'could not pull its image', severity: 'bad' },
  'given-up': { text: 'was stopped: it crashed past its restart policy', severity: 'bad' },
  'backing-off': { text: 'keeps crashing: held stopped for its back-off', severity: 'bad' },
  exited: { text: 'exited', severity: 'bad' },
  test: { text: 'sends a test message', severity: 'info' },
  'schedule-started': { text: 'began a scheduled run', severity: 'info' },
  'schedule-succeeded': { text: 'finished a scheduled run', severity: 'good' },
  'schedule-failed': { text: 'failed a scheduled run', severity: 'bad' },
  'schedule-skipped': { text: 'skipped a scheduled run', severity: 'info' },
  restored: { text: 'had its data restored from a backup', severity: 'info' },
  'restore-failed': { text: 'did not run on a restored backup, and has its data as it was again', severity: 'bad' },
  'backup-verified': { text: 'had a backup verified', severity: 'good' },
  'backup-verify-failed': { text: 'has a backup that cannot be restored', severity: 'bad' },
  'data-over-size': { text: 'uses more data than its size_mb', severity: 'bad' },
  alert: { text: 'raised an alert', severity: 'bad' },
};

/** The chat note of an event's JSON (docs/api.md §9), linking to `consoleUrl` where there is one. */
export function noteOf(event: Readonly<Record<string, unknown>>, consoleUrl: string | undefined): ChatNote {
  const botId = String(event.bot_id ?? '');
  const type = String(event.type ?? '');
  const what = WHAT[type] ?? { text: type, severity: 'info' as const };
  const revision = typeof event.revision === 'number' ? ` (revision ${event.revision})` : '';
  const exit = event.exit as { exit_code?: number | null; signal?: string | null } | undefined;
  const reasons = [
    typeof event.reason === 'string' ? event.reason : '',
    typeof event.message === 'string' ? event.message : '',
    typeof event.check === 'string' ? `its ${event.check} check failed${typeof event.output === 'string' && event.output ? `: ${event.output}` : ''}` : '',
    typeof event.crashes === 'number' && typeof event.window_s === 'number' ? `${event.crashes} crashes in ${event.window_s / 60} minutes` : '',
    typeof event.wait_s === 'number' ? `${String(event.crashes)} crashes; started again in ${event.wait_s} s (${String(event.until)})` : '',
    typeof event.from_revision === 'number' || typeof event.to_revision === 'number' ? `from revision ${String(event.from_revision)} to revision ${String(event.to_revision)}` : '',
    exit ? `exit code ${String(exit.exit_code)}${exit.signal ? ` (${exit.signal})` : ''}` : '',
    typeof event.image === 'string' && type !== 'deploy-failed' ? `image ${event.image}` : '',
    typeof event.backup_id === 'string' ? `backup ${event.backup_id}` : '',
    typeof event.used_bytes === 'number' ? `${String(event.path)} uses ${(event.used_bytes / 1024 / 1024).toFixed(1)} MiB of its ${String(event.size_mb)} MiB` : '',
    typeof event.schedule_id === 'string' ? `schedule ${typeof event.name === 'string' ? `${event.name} (${event.schedule_id})` : event.schedule_id} due at ${String(event.due_at)}` : '',
  ].filter((part) => part !== '');
  return {
    botId,
    type,
    title: `Bot ${botId} ${what.text}${revision}`,
    detail: reasons.join('; '),
    lines: typeof event.logs === 'string' ? event.logs : '',
    link: consoleUrl === undefined ? undefined : `${consoleUrl.replace(/\/+$/, '')}/#/bots/${encodeURIComponent(botId)}`,
    at: typeof event.at === 'string' ? event.at : new Date().toISOString(),
    severity: what.severity,
  };
}

/** At most `max` characters (UTF-16 units, as the services count), the cut marked. */
function within(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** The last lines that fit in `max` characters, whole lines first. */
function lastLinesWithin(lines: string, max: number): string {
  const trimmed = lines.replace(/\s+$/, '');
  if (trimmed.length <= max) return trimmed;
  const tail = trimmed.slice(trimmed.length - max + 2);
  const cut = tail.indexOf('\n');
  return `…\n${cut >= 0 ? tail.slice(cut + 1) : tail.slice(2)}`;
}

const COLOURS = { bad: 0xd93025, good: 0x188038, info: 0x1a73e8 } as const;

/**
 * Text a bot, an image or a registry wrote, shown by Discord as the text it is: every character its markdown
 * gives a meaning to is escaped with a backslash (which Discord drops when it draws the text): masked links
 * (`[text](url)`), headings, quotes, lists, emphasis, spoilers, code, mentions (`<@id>`), and the `:` that would
 * make a bare URL a link.
 */
export const discordEscaped = (text: string): string => text.replace(/[\\`*_~|>#\[\]()<:@!.-]/g, '\\$&');

/**
 * A Discord incoming webhook's message (discord.com/developers/docs/resources/webhook#execute-webhook): one
 * embed within its limits (title 256, description 4096, field values 1024, 6000 in all).
 */
export function discordMessage(url: string, note: ChatNote): ChatRequest {
  const fields = [{ name: 'Bot', value: within(discordEscaped(note.botId), 1024), inline: true }, { name: 'Event', value: within(discordEscaped(note.type), 1024), inline: true }];
  if (note.lines) fields.push({ name: 'Last lines', value: `\`\`\`\n${lastLinesWithin(note.lines.replaceAll('```', "'''"), 1000 - 8)}\n\`\`\``, inline: false });
  const embed = {
    title: within(note.title, 256),
    ...(note.detail ? { description: within(discordEscaped(note.detail), 2048) } : {}),
    ...(note.link ? { url: note.link } : {}),
    color: COLOURS[note.severity],
    timestamp: note.at,
    fields,
    footer: { text: 'bot-agent' },
  };
  return { url, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'bot-agent', embeds: [embed], allowed_mentions: { parse: [] } }) };
}

/** Slack's mrkdwn escapes (api.slack.com/reference/surfaces/formatting#escaping). */
const slackEscaped = (text: string): string => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/**
 * A Slack incoming webhook's message (api.slack.com/messaging/webhooks, Block Kit): `text` for notifications,
 * and blocks whose section texts stay within 3,000 characters.
 */
export function slackMessage(url: string, note: ChatNote): ChatRequest {
  const heading = note.link ? `*<${note.link}|${slackEscaped(note.title)}>*` : `*${slackEscaped(note.title)}*`;
  const blocks: object[] = [{ type: 'section', text: { type: 'mrkdwn', text: within(note.detail ? `${heading}\n${slackEscaped(note.detail)}` : heading, 3000) } }];
  if (note.lines) blocks.push({ type: 'section', text: { type: 'mrkdwn', text: `\`\`\`${lastLinesWithin(slackEscaped(note.lines), 2990)}\`\`\`` } });
  blocks.push({ type: 'context', elements: [{ type: 'mrkdwn', text: within(`bot-agent · ${note.type} · ${note.at}`, 3000) }] });
  return { url, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: within(note.title, 3000), blocks }) };
}

const htmlEscaped = (text: string): string => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/**
 * A Telegram Bot API sendMessage (core.telegram.org/bots/api#sendmessage) to the chat, in its HTML parse mode:
 * at most 4,096 characters of text after entities are parsed, and the tags it allows (b, a, pre).
 */
export function telegramMessage(api: string, token: string, chatId: string, note: ChatNote): ChatRequest {
  const head = `<b>${htmlEscaped(note.title)}</b>${note.detail ? `\n${htmlEscaped(within(note.detail, 1000))}` : ''}`;
  const link = note.link ? `\n<a href="${htmlEscaped(note.link)}">Console</a>` : '';
  const room = 4000 - within(note.title, 400).length - Math.min(note.detail.length, 1000) - 20;
  const lines = note.lines ? `\n<pre>${htmlEscaped(lastLinesWithin(note.lines, Math.max(0, room)))}</pre>` : '';
  return {
    url: `${api.replace(/\/+$/, '')}/bot${token}/sendMessage`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ chat_id: chatId, text: `${head}${lines}${link}`, parse_mode: 'HTML', link_preview_options: { is_disabled: true } }),
  };
}

/**
 * An ntfy publish as JSON (docs.ntfy.sh/publish/#publish-as-json) to the server's root, with the topic of the
 * configured topic URL: title, message (within 4,096 bytes), priority, tags and a click link.
 */
export function ntfyMessage(topicUrl: string, token: string | undefined, note: ChatNote): ChatRequest {
  const url = new URL(topicUrl);
  const topic = url.pathname.replace(/^\/+|\/+$/g, '');
  url.pathname = '/';
  const message = [note.detail, note.lines ? lastLinesWithin(note.lines, 3000) : ''].filter((part) => part !== '').join('\n\n') || note.title;
  const body = {
    topic,
    title: within(note.title, 250),
    message: Buffer.byteLength(message) > 4000 ? within(message, 1300) : message,
    priority: note.severity === 'bad' ? 4 : 3,
    tags: [note.severity === 'bad' ? 'warning' : note.severity === 'good' ? 'white_check_mark' : 'information_source', note.type],
    ...(note.link ? { click: note.link } : {}),
  };
  return { url: url.toString(), headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) };
}
