import type { Health } from './api.js';

/** A bot's health next to its state (docs/api.md §13); nothing for a bot without a check or heartbeats. */
export function HealthBadge({ health }: { health: Health }) {
  if (health.status === 'none') return null;
  const by = health.check === 'heartbeat' ? 'heartbeats' : 'health check';
  return (
    <span class={`badge health-${health.status}`} data-testid="health" title={`${by}${health.output ? `: ${health.output}` : ''}`}>
      {health.status}
    </span>
  );
}
