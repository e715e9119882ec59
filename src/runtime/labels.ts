/** Label (Docker) or label on Deployment and pod template (Kubernetes) naming a bot. */
export const BOT_LABEL = 'bot-agent/bot-id';

/** Label (Docker) or Deployment annotation (Kubernetes) naming the bot's owner. */
export const OWNER_LABEL = 'bot-agent/user-id';

export { BOT_ID_MAX_LENGTH, BOT_ID_PATTERN } from '../bot-id.js';
