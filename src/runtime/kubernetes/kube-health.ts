import type { V1Pod } from '@kubernetes/client-node';
import type { HealthStatus } from '../driver.js';

/**
 * What a bot's pod says of its health (docs/api.md §13): with a readiness probe on its container, ready
 * is `healthy`; not ready is `starting` while the probe may still be within its first failures, else
 * `unhealthy`. Without one, `none` (a liveness probe alone is the kubelet's business: its restarts are
 * recorded as they come). `sinceMs`: when the container's readiness last changed.
 */
export function podHealth(pod: V1Pod, container: string | undefined, runStartMs: number, now = Date.now()): { status: HealthStatus; sinceMs: number } {
  const spec = pod.spec?.containers?.find((c) => c.name === container);
  const probe = spec?.readinessProbe;
  const ready = pod.status?.containerStatuses?.find((s) => s.name === container)?.ready === true;
  const changed = pod.status?.conditions?.find((c) => c.type === 'ContainersReady')?.lastTransitionTime;
  const sinceMs = Math.max(runStartMs, changed === undefined ? runStartMs : new Date(changed).getTime());
  if (!probe) return { status: 'none', sinceMs: runStartMs };
  if (ready) return { status: 'healthy', sinceMs };
  // Until the probe has had its start period and failures, not ready is not a verdict yet.
  const startMs = ((probe.initialDelaySeconds ?? 0) + (probe.periodSeconds ?? 10) * (probe.failureThreshold ?? 3)) * 1000;
  return now - runStartMs < startMs ? { status: 'starting', sinceMs: runStartMs } : { status: 'unhealthy', sinceMs: Math.max(sinceMs, runStartMs + startMs) };
}
