import { IDLE_BOT } from '../helpers/docker-fixture.js';

/** Prints its arguments, one a line, then idles as IDLE_BOT does. */
export const TALKING_BOT = `for line in "$@"; do echo "$line"; done; ${IDLE_BOT}`;
/** Ignores SIGTERM, so that a restart waits the whole grace period. */
export const STUBBORN_BOT = "trap '' TERM; while :; do sleep 1; done";
