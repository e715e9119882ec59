import { constants } from 'node:os';

/** The name of signal `number` (9 is `SIGKILL`); undefined for a number that is none. */
export function signalName(number: number | undefined): string | undefined {
  if (number === undefined) return undefined;
  return Object.entries(constants.signals).find(([, n]) => n === number)?.[0];
}
