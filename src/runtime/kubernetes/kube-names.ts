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

/**
 * The Lease the agent's release before 0.2.0 took for a bot in operation, named by its id alone (ids that
 * differ only in case share it). Taken too while agents of that release may still run (docs/kubernetes.md,
 * "Upgrading"), so that one operation per bot holds across a rolling upgrade.
 */
export function legacyLeaseName(botId: string): string {
  return `bot-agent-op-${botId.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 253);
}
