import type { BotHistory } from '../history/bot-history.js';
import type { PullReport } from '../provisioning/provisioner.js';

/** The least time between two `pulling` events of one pull: a pull of many layers reports many times a second. */
export const PULLING_EVERY_MS = 2_000;

/**
 * A create's pull told as the bot's events (docs/api.md §9): `pulling` at its start and then at most
 * every PULLING_EVERY_MS with the bytes so far, then `pulled` or `pull-failed`.
 */
export function pullEvents(history: BotHistory, botId: string, now: () => number = Date.now): PullReport {
  let lastAt = 0;
  const note = (type: string, fields: Record<string, unknown>): void => void history.note(botId, type, fields);
  return {
    started(image) {
      lastAt = now();
      note('pulling', { image, bytes: 0, total_bytes: 0 });
    },
    progress(image, { bytes, totalBytes }) {
      if (now() - lastAt < PULLING_EVERY_MS) return;
      lastAt = now();
      note('pulling', { image, bytes, total_bytes: totalBytes });
    },
    ended(image, outcome) {
      if ('error' in outcome) note('pull-failed', { image, message: outcome.error.message });
      else note('pulled', { image, bytes: outcome.bytes, duration_ms: outcome.durationMs });
    },
  };
}
