import test from 'ava';
import { retainedIds } from '../../src/backups/retention.js';

// Retention (docs/api.md §20), the clock in hand.
const NOW = Date.parse('2026-12-03T12:00:00Z');
const at = (iso: string, id = iso, locked = false) => ({ id, created_at: iso, locked });

test('the newest `last` are kept, and nothing else without periods', (t) => {
  const backups = ['2026-12-03T11:00:00Z', '2026-12-03T10:00:00Z', '2026-12-02T10:00:00Z', '2026-12-01T10:00:00Z'].map((iso) => at(iso));
  t.deepEqual([...retainedIds(backups, { last: 2 }, NOW)].sort(), ['2026-12-03T10:00:00Z', '2026-12-03T11:00:00Z']);
  t.deepEqual([...retainedIds(backups, {}, NOW)], [], 'a policy of nothing keeps nothing but the locked');
});

test('the newest of each of the last days, weeks and months, today, this week and this month counted', (t) => {
  const backups = [
    at('2026-12-03T11:00:00Z'),
    at('2026-12-03T01:00:00Z'),
    at('2026-12-02T23:00:00Z'),
    at('2026-12-02T05:00:00Z'),
    at('2026-11-30T05:00:00Z'), // a Monday: this week's first day
    at('2026-11-29T05:00:00Z'), // the Sunday before: last week
    at('2026-11-15T05:00:00Z'),
    at('2026-10-31T05:00:00Z'),
    at('2026-09-30T05:00:00Z'),
  ];
  t.deepEqual([...retainedIds(backups, { days: 2 }, NOW)].sort(), ['2026-12-02T23:00:00Z', '2026-12-03T11:00:00Z']);
  t.deepEqual([...retainedIds(backups, { weeks: 2 }, NOW)].sort(), ['2026-11-29T05:00:00Z', '2026-12-03T11:00:00Z']);
  t.deepEqual([...retainedIds(backups, { months: 3 }, NOW)].sort(), ['2026-10-31T05:00:00Z', '2026-11-30T05:00:00Z', '2026-12-03T11:00:00Z']);
  t.deepEqual([...retainedIds(backups, { last: 1, days: 1, months: 1 }, NOW)], ['2026-12-03T11:00:00Z'], 'one backup may be kept for several reasons');
});

test('a locked backup is always kept, and takes no place of the last', (t) => {
  const backups = [at('2026-12-03T11:00:00Z', 'new'), at('2026-12-03T10:00:00Z', 'locked', true), at('2026-12-03T09:00:00Z', 'older'), at('2025-01-01T00:00:00Z', 'ancient', true)];
  t.deepEqual([...retainedIds(backups, { last: 2 }, NOW)].sort(), ['ancient', 'locked', 'new', 'older']);
  t.deepEqual([...retainedIds(backups, { last: 1 }, NOW)].sort(), ['ancient', 'locked', 'new']);
});
