import { generationIn } from '../../bot-id.js';
import type { HealthPolicy } from '../driver.js';
import { healthPolicyOf } from '../health-policy.js';
import { GENERATION_LABEL } from '../labels.js';

/** A bot the agent made (it carries a generation) with a restart policy: its crashes may be the agent's to restart (docs/api.md §13). */
export function agentRestartable(labels: Readonly<Record<string, string>>): boolean {
  return generationIn(labels[GENERATION_LABEL]) !== null && healthPolicyOf(labels).restart !== undefined;
}

/** A bot's health policy from its labels; the crashes of a bot the agent did not make are the engine's to restart, with its own back-off. */
export function dockerHealthPolicy(labels: Readonly<Record<string, string>>): HealthPolicy {
  const policy = healthPolicyOf(labels);
  return policy.restart === undefined ? policy : { ...policy, restart: { ...policy.restart, crashBackOff: agentRestartable(labels) } };
}
