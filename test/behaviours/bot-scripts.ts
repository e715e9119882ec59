import { IDLE_BOT } from '../helpers/docker-fixture.js';

/** Prints its arguments, one a line, then idles as IDLE_BOT does. */
export const TALKING_BOT = `for line in "$@"; do echo "$line"; done; ${IDLE_BOT}`;
/** Prints each argument with the second it printed it in (`early 1765015200`), two seconds apart, then idles. */
export const PACED_BOT = `for line in "$@"; do echo "$line $(date +%s)"; sleep 2; done; ${IDLE_BOT}`;
/** Ignores SIGTERM, so that a restart waits the whole grace period. */
export const STUBBORN_BOT = "trap '' TERM; while :; do sleep 1; done";
