import type { HealthPolicy, HealthStatus } from './driver.js';
import { HEALTH_GRACE_LABEL, HEARTBEAT_TTL_LABEL } from './labels.js';

/** The most of a failing check's output a status, record or event carries (docs/api.md §13). */
export const HEALTH_OUTPUT_MAX = 4096;

/** A check's output as the agent passes it on: its end when longer than HEALTH_OUTPUT_MAX. */
export function boundedOutput(output: string | undefined | null): string | null {
  if (output === undefined || output === null) return null;
  const text = output.trimEnd();
  return text.length > HEALTH_OUTPUT_MAX ? text.slice(text.length - HEALTH_OUTPUT_MAX) : text;
}

/** Whole seconds from 1 to a day in a label; anything else is as if absent. */
function secondsIn(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,5}$/.test(value)) return undefined;
  const seconds = Number(value);
  return seconds >= 1 && seconds <= 86_400 ? seconds * 1000 : undefined;
}

/** The health policy a bot's labels (Docker) or annotations (Kubernetes) carry. */
export function healthPolicyOf(labels: Readonly<Record<string, string>> | undefined): HealthPolicy {
  return { graceMs: secondsIn(labels?.[HEALTH_GRACE_LABEL]), heartbeatTtlMs: secondsIn(labels?.[HEARTBEAT_TTL_LABEL]) };
}

/** The labels (annotations) that keep a policy on the bot. */
export function healthPolicyLabels(policy: { readonly graceS?: number | undefined; readonly heartbeatTtlS?: number | undefined }): Record<string, string> {
  return {
    ...(policy.graceS === undefined ? {} : { [HEALTH_GRACE_LABEL]: String(policy.graceS) }),
    ...(policy.heartbeatTtlS === undefined ? {} : { [HEARTBEAT_TTL_LABEL]: String(policy.heartbeatTtlS) }),
  };
}

/** Docker's health status as the agent names it: `starting`, `healthy`, `unhealthy`; none without a check. */
export function healthStatusOf(dockerStatus: string | undefined): HealthStatus {
  return dockerStatus === 'healthy' || dockerStatus === 'unhealthy' || dockerStatus === 'starting' ? dockerStatus : 'none';
}

/** The health a `docker ps` status line shows: `Up 5 seconds (unhealthy)`, `(health: starting)`. */
export function healthInStatusLine(status: string | undefined): HealthStatus {
  const match = /\((?:health: )?(healthy|unhealthy|starting)\)$/.exec(status ?? '');
  return healthStatusOf(match?.[1]);
}
