/** Label (Docker) or label on Deployment and pod template (Kubernetes) naming a bot. */
export const BOT_LABEL = 'bot-agent/bot-id';

/** Label (Docker) or Deployment annotation (Kubernetes) naming the bot's owner. */
export const OWNER_LABEL = 'bot-agent/user-id';

export { BOT_ID_MAX_LENGTH, BOT_ID_PATTERN } from '../bot-id.js';

/** Label (Docker) or Deployment annotation (Kubernetes): seconds a bot may stay unhealthy before the watchdog restarts it. */
export const HEALTH_GRACE_LABEL = 'bot-agent/health-grace-s';

/**
 * Label (Docker): a value made when the bot was made (docs/api.md §4, rule 8), carried in its tokens. A bot
 * removed and made again under its id has another, so the removed one's tokens name nobody.
 */
export const GENERATION_LABEL = 'bot-agent/generation';

/** Label (Docker) or Deployment annotation (Kubernetes): seconds after its last heartbeat a bot turns unhealthy. */
export const HEARTBEAT_TTL_LABEL = 'bot-agent/heartbeat-ttl-s';

/**
 * Labels (Docker) or Deployment annotations (Kubernetes) of a bot's restart policy (docs/api.md §13): the crashes
 * within a window past which the agent gives up on it, and the watchdog's back-off between its restarts.
 */
export const RESTART_MAX_CRASHES_LABEL = 'bot-agent/restart-max-crashes';
export const RESTART_WINDOW_LABEL = 'bot-agent/restart-window-s';
export const RESTART_BACKOFF_LABEL = 'bot-agent/restart-backoff-s';
export const RESTART_BACKOFF_MAX_LABEL = 'bot-agent/restart-backoff-max-s';

/** The revision a bot's container runs (docs/api.md §15); a container without it is revision 1. */
export const REVISION_LABEL = 'bot-agent/revision';

/** When a deploy's new run is to be judged by (ms since the epoch), on that run's container: what an agent that finds the deploy left reads. */
export const DEPLOY_DEADLINE_LABEL = 'bot-agent/deploy-deadline-ms';

/** Labels (Docker) of a bot's data volume (docs/api.md §19): the folder it holds in the bot, and its size_mb where one was asked. */
export const DATA_PATH_LABEL = 'bot-agent/data-path';
export const DATA_SIZE_LABEL = 'bot-agent/data-size-mb';

/**
 * Labels (Docker) of what a restore makes (docs/api.md §20): its scratch volumes and its helper containers, named
 * with the bot and the restore, when it began, whether the bot ran before it (to be started again by an agent that
 * finds the restore left), and (on a helper) its step: `fill` (never run) or `swap` (replaces the bot's data).
 */
export const RESTORE_OF_LABEL = 'bot-agent/restore-of';
export const RESTORE_TAG_LABEL = 'bot-agent/restore-tag';
export const RESTORE_START_LABEL = 'bot-agent/restore-start';
export const RESTORE_BEGUN_LABEL = 'bot-agent/restore-begun';
export const RESTORE_STEP_LABEL = 'bot-agent/restore-step';

/** The revision a label or annotation says (docs/api.md §15); one that says none, or nonsense, is revision 1. */
export function revisionIn(value: string | undefined): number {
  const revision = Number(value);
  return Number.isSafeInteger(revision) && revision > 0 ? revision : 1;
}
