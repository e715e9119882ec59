import { existsSync, readFileSync } from 'node:fs';

/** Where npm run bench:outage writes its section of BENCHMARKS.md; npm run bench keeps it when it writes the rest. */
export const OUTAGE_BEGIN = '<!-- bench:outage -->';
export const OUTAGE_END = '<!-- /bench:outage -->';

/** The outage section of the BENCHMARKS.md there is now, with its markers; empty when there is none. */
export function outageSection(): string {
  const current = existsSync('BENCHMARKS.md') ? readFileSync('BENCHMARKS.md', 'utf8') : '';
  const begin = current.indexOf(OUTAGE_BEGIN);
  const end = current.indexOf(OUTAGE_END);
  return begin >= 0 && end > begin ? current.slice(begin, end + OUTAGE_END.length) : '';
}
