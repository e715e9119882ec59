/**
 * Which backups a retention policy keeps (docs/api.md §20): the newest `last`, and the newest of each of the
 * last `days` days, `weeks` weeks and `months` months (UTC; weeks begin on Monday), as restic's and borg's
 * `--keep-*` do. A locked backup is always kept, and counts toward nothing.
 */
export interface RetentionPolicy {
  readonly last?: number | undefined;
  readonly days?: number | undefined;
  readonly weeks?: number | undefined;
  readonly months?: number | undefined;
}

export interface Retained {
  readonly id: string;
  readonly created_at: string;
  readonly locked?: boolean | undefined;
}

const DAY_MS = 86_400_000;

const dayOf = (ms: number) => Math.floor(ms / DAY_MS);
/** The Monday that begins the week (1970-01-01 was a Thursday). */
const weekOf = (ms: number) => Math.floor((dayOf(ms) + 3) / 7);
const monthOf = (ms: number) => {
  const at = new Date(ms);
  return at.getUTCFullYear() * 12 + at.getUTCMonth();
};

/** The ids of `backups` the policy keeps; every other one may go. */
export function retainedIds(backups: readonly Retained[], policy: RetentionPolicy, nowMs: number): Set<string> {
  const kept = new Set<string>();
  const newestFirst = [...backups].sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
  for (const backup of newestFirst) if (backup.locked) kept.add(backup.id);
  const unlocked = newestFirst.filter((backup) => !backup.locked);
  for (const backup of unlocked.slice(0, policy.last ?? 0)) kept.add(backup.id);
  const byPeriod = (count: number | undefined, periodOf: (ms: number) => number) => {
    if (!count) return;
    const newest = periodOf(nowMs);
    const seen = new Set<number>();
    for (const backup of unlocked) {
      const period = periodOf(Date.parse(backup.created_at));
      // The newest of each period within the last `count`, this one included.
      if (newest - period >= count || seen.has(period)) continue;
      seen.add(period);
      kept.add(backup.id);
    }
  };
  byPeriod(policy.days, dayOf);
  byPeriod(policy.weeks, weekOf);
  byPeriod(policy.months, monthOf);
  return kept;
}
