import type { RestartPolicySpec } from '../provisioning/bot-spec.js';
import type { HealthPolicy, HealthStatus, RestartPolicy } from './driver.js';
import { HEALTH_GRACE_LABEL, HEARTBEAT_TTL_LABEL, RESTART_BACKOFF_LABEL, RESTART_BACKOFF_MAX_LABEL, RESTART_MAX_CRASHES_LABEL, RESTART_WINDOW_LABEL } from './labels.js';

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

/** The bounds and defaults of a create's `restart_policy` (docs/api.md §13). */
export const RESTART_POLICY = {
  maxCrashes: { min: 1, max: 100 },
  windowS: { min: 10, max: 86_400, default: 600 },
  backoffS: { min: 1, max: 3_600, default: 10 },
  backoffMaxS: { min: 1, max: 86_400, default: 300 },
} as const;

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
    restart: restartPolicyOf(labels),
  };
}

/** The restart policy the labels carry (each value within a create's bounds, else its default); undefined when they name none. */
function restartPolicyOf(labels: Readonly<Record<string, string>> | undefined): RestartPolicy | undefined {
  const { maxCrashes, windowS, backoffS, backoffMaxS } = RESTART_POLICY;
  const max = labels?.[RESTART_MAX_CRASHES_LABEL];
  const named = [RESTART_MAX_CRASHES_LABEL, RESTART_WINDOW_LABEL, RESTART_BACKOFF_LABEL, RESTART_BACKOFF_MAX_LABEL].some((label) => (labels?.[label] ?? '') !== '');
  if (!named) return undefined;
  const backoffFirstMs = secondsIn(labels?.[RESTART_BACKOFF_LABEL], backoffS.min, backoffS.max) ?? backoffS.default * 1000;
  return {
    maxCrashes: max !== undefined && /^\d{1,3}$/.test(max) && Number(max) >= maxCrashes.min && Number(max) <= maxCrashes.max ? Number(max) : undefined,
    windowMs: secondsIn(labels?.[RESTART_WINDOW_LABEL], windowS.min, windowS.max) ?? windowS.default * 1000,
    backoffFirstMs,
    backoffMaxMs: Math.max(backoffFirstMs, secondsIn(labels?.[RESTART_BACKOFF_MAX_LABEL], backoffMaxS.min, backoffMaxS.max) ?? backoffMaxS.default * 1000),
  };
}

/** The restart policy's labels, each empty (as if absent), for the same reason as NO_HEALTH_POLICY. */
export const NO_RESTART_POLICY: Readonly<Record<string, string>> = Object.freeze({
  [RESTART_MAX_CRASHES_LABEL]: '',
  [RESTART_WINDOW_LABEL]: '',
  [RESTART_BACKOFF_LABEL]: '',
  [RESTART_BACKOFF_MAX_LABEL]: '',
});

/** The labels (annotations) that keep a create's restart policy on the bot. */
export function restartPolicyLabels(policy: RestartPolicySpec | undefined): Record<string, string> {
  if (policy === undefined) return {};
  const entries: [string, number | undefined][] = [
    [RESTART_MAX_CRASHES_LABEL, policy.maxCrashes],
    [RESTART_WINDOW_LABEL, policy.windowS],
    [RESTART_BACKOFF_LABEL, policy.backoffS],
    [RESTART_BACKOFF_MAX_LABEL, policy.backoffMaxS],
  ];
  return Object.fromEntries(entries.filter((entry): entry is [string, number] => entry[1] !== undefined).map(([label, value]) => [label, String(value)]));
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
