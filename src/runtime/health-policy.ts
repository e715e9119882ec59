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

/** The bounds of a heartbeat's `ttl_s` and of a health block's `grace_s`, in seconds (docs/api.md §13). */
export const HEARTBEAT_TTL_MIN_S = 5;
export const HEARTBEAT_TTL_MAX_S = 3_600;
export const GRACE_MIN_S = 5;
export const GRACE_MAX_S = 86_400;

/** Whole seconds within the API's bounds in a label, as ms; anything else is as if absent. */
function secondsIn(value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined || !/^\d{1,5}$/.test(value)) return undefined;
  const seconds = Number(value);
  return seconds >= min && seconds <= max ? seconds * 1000 : undefined;
}

/**
 * The health policy a bot's labels (Docker) or annotations (Kubernetes) carry, within the bounds the API
 * puts on a create's health block: Docker merges an image's own `LABEL`s into its containers, so these are
 * input from whoever built the image, and a value past the bounds is as if absent.
 */
export function healthPolicyOf(labels: Readonly<Record<string, string>> | undefined): HealthPolicy {
  return {
    graceMs: secondsIn(labels?.[HEALTH_GRACE_LABEL], GRACE_MIN_S, GRACE_MAX_S),
    heartbeatTtlMs: secondsIn(labels?.[HEARTBEAT_TTL_LABEL], HEARTBEAT_TTL_MIN_S, HEARTBEAT_TTL_MAX_S),
  };
}

/**
 * The policy labels, each empty (as if absent): a create sets them all, so that an image's own labels of the
 * same names (which Docker would merge into the container) say nothing.
 */
export const NO_HEALTH_POLICY: Readonly<Record<string, string>> = Object.freeze({ [HEALTH_GRACE_LABEL]: '', [HEARTBEAT_TTL_LABEL]: '' });

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
