-- Schedules (docs/api.md §18): a bot's chains of actions at set times. `handled_through_ms` is the newest due
-- time some agent claimed (run or skipped): a claim moves it from the value it read, in the transaction that
-- writes the run, so one agent's claim of a due time wins and the others change nothing.
CREATE TABLE schedules (id TEXT PRIMARY KEY, bot_id TEXT NOT NULL, spec TEXT NOT NULL, enabled INTEGER NOT NULL, version BIGINT NOT NULL, handled_through_ms BIGINT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL);
CREATE INDEX schedules_by_bot ON schedules (bot_id);
-- One row per due time claimed: `running` while its agent's lease holds, then how it ended; a lease lapsed
-- (its agent died mid-chain) makes it `cut`, never run again.
CREATE TABLE schedule_runs (schedule_id TEXT NOT NULL, due_ms BIGINT NOT NULL, bot_id TEXT NOT NULL, state TEXT NOT NULL, agent TEXT, lease_until_ms BIGINT, started_ms BIGINT, ended_ms BIGINT, actions TEXT NOT NULL, reason TEXT, PRIMARY KEY (schedule_id, due_ms));
CREATE INDEX schedule_runs_going ON schedule_runs (state, lease_until_ms);
CREATE INDEX schedule_runs_by_bot ON schedule_runs (bot_id);
