/** Label (Docker) or label on Deployment and pod template (Kubernetes) naming a bot. */
export const BOT_LABEL = 'bot-agent/bot-id';

/** Label (Docker) or Deployment annotation (Kubernetes) naming the bot's owner. */
export const OWNER_LABEL = 'bot-agent/user-id';

/** The shape of a bot id: `bot_<digits>_<digits>_<suffix>`, at most 63 characters. */
export const BOT_ID_PATTERN = /^bot_[0-9]+_[0-9]+_[A-Za-z0-9]+$/;
export const BOT_ID_MAX_LENGTH = 63;
