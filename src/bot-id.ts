import { randomBytes } from 'node:crypto';

/** The shape of a bot id (docs/api.md §1): `bot_<digits>_<digits>_<suffix>`, at most 63 characters. */
export const BOT_ID_PATTERN = /^bot_[0-9]+_[0-9]+_[A-Za-z0-9]+$/;
export const BOT_ID_MAX_LENGTH = 63;

/** What a bot is made with, carried in its tokens (docs/api.md §4, rule 8): 16 URL-safe characters. */
export const GENERATION_PATTERN = /^[A-Za-z0-9_-]{16}$/;

/** A new value for a bot being made. */
export function newGeneration(): string {
  return randomBytes(12).toString('base64url');
}

/** A bot's generation as its label says it: one of the shape GENERATION_PATTERN, else none (null). */
export function generationIn(label: string | undefined): string | null {
  return label !== undefined && GENERATION_PATTERN.test(label) ? label : null;
}
