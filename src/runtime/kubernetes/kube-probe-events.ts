import type { CoreV1Event } from '@kubernetes/client-node';
import { boundedOutput } from '../health-policy.js';

/** Reads a pod's events (the kubelet's word on its probes); none when they cannot be read. */
export type PodEventsReader = (pod: string) => Promise<CoreV1Event[]>;

/** How a failed probe's event begins: `Liveness probe failed: <output>`. */
const PROBE_FAILED = /^(Liveness|Readiness|Startup) probe failed: ?/;
/** How the kubelet says it kills a container for its liveness probe. */
const LIVENESS_KILL = /failed liveness probe, will be restarted/;
/** A kubelet's event may be stamped a little before the run's start or after its end by the clocks involved. */
const SLACK_MS = 2_000;

const timeOf = (event: CoreV1Event): number => new Date(event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp ?? 0).getTime();

/** The output of the newest failed probe among a pod's events (docs/api.md §13), bounded; null when none failed. */
export function lastProbeFailure(events: readonly CoreV1Event[], kind?: 'Liveness' | 'Readiness'): string | null {
  const failed = events
    .filter((event) => event.reason === 'Unhealthy' && PROBE_FAILED.test(event.message ?? '') && (kind === undefined || event.message?.startsWith(kind)))
    .sort((a, b) => timeOf(a) - timeOf(b))
    .at(-1);
  return failed ? boundedOutput((failed.message ?? '').replace(PROBE_FAILED, '')) : null;
}

/**
 * Whether the kubelet killed the container for a failed liveness probe while the run from `startedMs` to
 * `endedMs` lasted, and what the probe said: the run's end is then an end for its health (docs/api.md §13).
 */
export function livenessKill(events: readonly CoreV1Event[], startedMs: number | undefined, endedMs: number): { check: 'exec'; output: string | null } | undefined {
  const killed = events.some((event) => {
    if (event.reason !== 'Killing' || !LIVENESS_KILL.test(event.message ?? '')) return false;
    const at = timeOf(event);
    return at >= (startedMs ?? 0) - SLACK_MS && at <= endedMs + SLACK_MS;
  });
  return killed ? { check: 'exec', output: lastProbeFailure(events, 'Liveness') } : undefined;
}
