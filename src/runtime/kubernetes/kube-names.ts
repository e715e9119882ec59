import { createHash } from 'node:crypto';

/**
 * An object name for a bot id: bot ids may hold underscores and capitals, which
 * names cannot, so the id is lowered, its underscores turned to dashes, and a
 * hash of the id appended to keep two ids that differ only in case apart.
 */
export function objectName(botId: string): string {
  const hash = createHash('sha256').update(botId).digest('hex').slice(0, 6);
  return `${botId.toLowerCase().replace(/_/g, '-').slice(0, 56)}-${hash}`;
}

/** The Lease of a bot in operation: named as the bot's objects are, so ids that differ only in case have a Lease each. */
export function leaseName(botId: string): string {
  return `bot-agent-op-${objectName(botId)}`;
}
