/** The shape of a bot id (docs/api.md §1): `bot_<digits>_<digits>_<suffix>`, at most 63 characters. */
export const BOT_ID_PATTERN = /^bot_[0-9]+_[0-9]+_[A-Za-z0-9]+$/;
export const BOT_ID_MAX_LENGTH = 63;
