import test from 'ava';
import { mayHaveStartedSince, startedAfter, uptimeCeilingMs } from '../../src/runtime/docker/docker-uptime.js';

test("the engine's status line bounds how long a container has run: counts are truncated, hours rounded", (t) => {
  t.is(uptimeCeilingMs('Up Less than a second'), 1_000);
  t.is(uptimeCeilingMs('Up 1 second'), 2_000);
  t.is(uptimeCeilingMs('Up 14 seconds (healthy)'), 15_000);
  t.is(uptimeCeilingMs('Up About a minute'), 120_000);
  t.is(uptimeCeilingMs('Up 3 minutes (Paused)'), 240_000);
  t.is(uptimeCeilingMs('Up About an hour'), 5_400_000);
  t.is(uptimeCeilingMs('Up 5 hours'), 5.5 * 3_600_000);
  t.is(uptimeCeilingMs('Up 2 days'), 3 * 86_400_000 + 1_800_000);
  t.is(uptimeCeilingMs('Up 3 weeks'), 4 * 7 * 86_400_000);
  t.is(uptimeCeilingMs('Up 2 months'), 3 * 30 * 86_400_000);
  t.is(uptimeCeilingMs('Up 4 years'), 5 * 365 * 86_400_000);
  for (const other of [undefined, '', 'Exited (0) 5 seconds ago', 'Restarting (1) 2 seconds ago', 'Created', 'up 5 seconds']) {
    t.is(uptimeCeilingMs(other), undefined, String(other));
  }
});

test('a container started again is told by an uptime shorter than the time since the start held; a status of another shape tells nothing', (t) => {
  const listedAtMs = Date.parse('2026-12-02T12:00:00Z');
  const before = (ms: number): Date => new Date(listedAtMs - ms);
  t.true(startedAfter('Up 2 seconds', before(10_000), listedAtMs));
  t.false(startedAfter('Up 9 seconds', before(10_000), listedAtMs));
  // The engine's clock a little ahead of the agent's, or the listing answered late: no restart.
  t.false(startedAfter('Up 10 seconds', before(10_500), listedAtMs));
  t.false(startedAfter('Up 3 hours', before(3 * 3_600_000), listedAtMs));
  t.true(startedAfter('Up 5 minutes', before(3 * 3_600_000), listedAtMs));
  t.false(startedAfter('Exited (0) 1 second ago', before(10_000), listedAtMs));
});

test('a container may have started since a time unless its uptime proves it ran longer: the shortest run each line stands for, and a second for the clocks', (t) => {
  const answeredAtMs = Date.parse('2026-12-02T12:00:00Z');
  const ago = (ms: number): number => answeredAtMs - ms;
  t.true(mayHaveStartedSince('Up 3 seconds', ago(5_000), answeredAtMs));
  t.true(mayHaveStartedSince('Up 5 seconds', ago(5_000), answeredAtMs));
  t.false(mayHaveStartedSince('Up 7 seconds', ago(5_000), answeredAtMs));
  t.true(mayHaveStartedSince('Up About a minute', ago(60_000), answeredAtMs));
  t.false(mayHaveStartedSince('Up About a minute', ago(30_000), answeredAtMs));
  t.true(mayHaveStartedSince('Up About an hour', ago(3_600_000), answeredAtMs));
  t.false(mayHaveStartedSince('Up 2 hours (healthy)', ago(60_000), answeredAtMs));
  t.false(mayHaveStartedSince('Up 2 days', ago(86_400_000), answeredAtMs));
  t.true(mayHaveStartedSince('Up 2 days', ago(2 * 86_400_000), answeredAtMs));
  for (const other of [undefined, '', 'Restarting (1) 2 seconds ago', 'up 5 seconds']) t.true(mayHaveStartedSince(other, ago(5_000), answeredAtMs), String(other));
});
