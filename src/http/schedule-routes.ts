import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import { object, string } from 'yup';
import { AlreadyExists, messages, NotFound, Unprocessable } from '../errors.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { RunGoing } from '../schedules/scheduler.js';
import type { Scheduler } from '../schedules/scheduler.js';
import { SCHEDULES_PER_BOT } from '../schedules/schedule-spec.js';
import type { ScheduleAction } from '../schedules/schedule-spec.js';
import { changedSpec, scheduleChange, scheduleRequest, specOf, validSchedule } from './schedule-schemas.js';
import type { ScheduleSpec } from '../schedules/schedule-spec.js';
import { TooManySchedules } from '../schedules/schedule-store.js';
import type { ScheduleStore, StoredRun, StoredSchedule } from '../schedules/schedule-store.js';
import { wholeNumber } from '../whole-number.js';
import type { Access } from './access.js';
import { botIdInPath, digits, validateQuery } from './schemas.js';

/** How many next due times a schedule's answer lists. */
const NEXT_DUE_LISTED = 5;
const DEFAULT_RUNS = 20;
const MAX_RUNS = 100;

const SCHEDULE_ID = /^sch_[0-9a-f]{16}$/;

/** Query of a schedule's runs: how many, and before which due time (a page's last, for the next page). */
export const runsQuery = object({
  limit: wholeNumber('limit', 1, MAX_RUNS).transform(digits),
  before: string().strict().typeError('before must be a due time').matches(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'before must be a due time as a run answers it, e.g. 2026-12-02T03:00:00.000Z'),
});

export interface ScheduleRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly store: ScheduleStore;
  readonly scheduler: Pick<Scheduler, 'runNow' | 'changed' | 'nextDueTimes'>;
  readonly access: Access;
  /** Whether the runtime deploys (docs/api.md §15): a `deploy` action is refused where it does not. */
  readonly deploys: boolean;
  /** Whether the agent makes backups (docs/api.md §20): a `backup` action is refused where it does not. */
  readonly backups: boolean;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** A schedule as every answer says it (docs/api.md §18). */
export function scheduleAnswer(schedule: StoredSchedule, nextDue: readonly number[]): Record<string, unknown> {
  return {
    id: schedule.id,
    bot_id: schedule.botId,
    ...schedule.spec,
    actions: schedule.spec.actions.map(withoutSecrets),
    created_at: iso(schedule.createdMs),
    updated_at: iso(schedule.updatedMs),
    next_due_at: nextDue.map((due) => iso(due)),
  };
}

/** An action as answered: a deploy's variables by name, a registry's password never (docs/api.md §18). */
function withoutSecrets(action: ScheduleAction): ScheduleAction {
  if (!action.deploy) return action;
  const { env, registry_auth: login, ...rest } = action.deploy as { env?: Record<string, unknown>; registry_auth?: { username?: unknown } };
  return {
    ...action,
    deploy: {
      ...rest,
      ...(env ? { env: Object.fromEntries(Object.keys(env).map((name) => [name, '(set)'])) } : {}),
      ...(login ? { registry_auth: { username: login.username, password: '(set)' } } : {}),
    },
  };
}

/** A run as its list answers it. */
export function runAnswer(run: StoredRun): Record<string, unknown> {
  return {
    schedule_id: run.scheduleId,
    due_at: iso(run.dueMs),
    state: run.state,
    started_at: iso(run.startedMs),
    ended_at: iso(run.endedMs),
    reason: run.reason,
    actions: run.actions,
  };
}

/** A bot's schedules (docs/api.md §18): the platform's alone, never a bot's, not even for itself. */
export function scheduleRoutes({ driver, store, scheduler, access, deploys, backups }: ScheduleRoutesDeps): Router {
  const router = new Router();

  /** The platform only; the bot named in the path, which must exist. */
  async function botOf(ctx: Context): Promise<string> {
    const botId = botIdInPath(ctx.params.bot_id);
    await access.platformFor(ctx, messages.platformOnlySchedules);
    ctx.state.botId = botId;
    await driver.findBot(botId);
    return botId;
  }

  async function scheduleOf(ctx: Context, botId: string): Promise<StoredSchedule> {
    const id = ctx.params.schedule_id ?? '';
    const schedule = SCHEDULE_ID.test(id) ? await store.get(botId, id) : undefined;
    if (!schedule) throw new NotFound(`no schedule ${JSON.stringify(id.slice(0, 64))} of bot ${botId}`);
    return schedule;
  }

  /** What this agent cannot run, refused before it is kept. */
  function runnable(spec: ScheduleSpec): ScheduleSpec {
    for (const [index, action] of spec.actions.entries()) {
      if ((action.type === 'backup' || action.type === 'verify') && !backups) throw new Unprocessable(`actions[${index}].type ${action.type} is not available on this agent: it makes no backups here (docs/api.md §20)`);
      if (action.type === 'deploy' && !deploys) throw new Unprocessable(`actions[${index}].type deploy is not available on the ${driver.runtime} runtime (docs/api.md §15)`);
      if (action.type === 'command' && !driver.exec) throw new Unprocessable(`actions[${index}].type command is not available on the ${driver.runtime} runtime`);
    }
    return spec;
  }

  const answer = (schedule: StoredSchedule) => scheduleAnswer(schedule, scheduler.nextDueTimes(schedule, NEXT_DUE_LISTED));

  router.post('/api/admin/bots/:bot_id/schedules', async (ctx) => {
    const botId = await botOf(ctx);
    const spec = runnable(specOf(validSchedule(scheduleRequest, ctx.request.body)));
    let schedule: StoredSchedule;
    try {
      schedule = await store.create(`sch_${randomBytes(8).toString('hex')}`, botId, spec, Date.now());
    } catch (err) {
      if (err instanceof TooManySchedules) throw new AlreadyExists(`bot ${botId} has ${SCHEDULES_PER_BOT} schedules, the most a bot may have: remove one first`);
      throw err;
    }
    scheduler.changed();
    ctx.status = 201;
    ctx.body = { ok: true, schedule: answer(schedule) };
  });

  router.get('/api/admin/bots/:bot_id/schedules', async (ctx) => {
    const botId = await botOf(ctx);
    ctx.body = { ok: true, schedules: (await store.ofBot(botId)).map(answer) };
  });

  router.get('/api/admin/bots/:bot_id/schedules/:schedule_id', async (ctx) => {
    const botId = await botOf(ctx);
    ctx.body = { ok: true, schedule: answer(await scheduleOf(ctx, botId)) };
  });

  async function change(ctx: Context, fields: unknown): Promise<void> {
    const botId = await botOf(ctx);
    const before = await scheduleOf(ctx, botId);
    const spec = runnable(changedSpec(before.spec, validSchedule(scheduleChange, fields)));
    const after = await store.update(botId, before.id, spec, Date.now());
    if (!after) throw new NotFound(`no schedule ${before.id} of bot ${botId}`);
    scheduler.changed();
    ctx.body = { ok: true, schedule: answer(after) };
  }

  router.patch('/api/admin/bots/:bot_id/schedules/:schedule_id', (ctx) => change(ctx, ctx.request.body));
  router.post('/api/admin/bots/:bot_id/schedules/:schedule_id/enable', (ctx) => change(ctx, { enabled: true }));
  router.post('/api/admin/bots/:bot_id/schedules/:schedule_id/disable', (ctx) => change(ctx, { enabled: false }));

  router.delete('/api/admin/bots/:bot_id/schedules/:schedule_id', async (ctx) => {
    const botId = await botOf(ctx);
    const schedule = await scheduleOf(ctx, botId);
    await store.remove(botId, schedule.id);
    scheduler.changed();
    ctx.body = { ok: true, message: `Schedule ${schedule.id} of bot ${botId} removed` };
  });

  router.post('/api/admin/bots/:bot_id/schedules/:schedule_id/run', async (ctx) => {
    const botId = await botOf(ctx);
    const schedule = await scheduleOf(ctx, botId);
    let run: StoredRun;
    try {
      run = await scheduler.runNow(schedule);
    } catch (err) {
      if (err instanceof RunGoing) throw new AlreadyExists(`a run of schedule ${schedule.id} is under way: wait for it to end (GET /api/bots/${botId}/schedules/${schedule.id}/runs)`);
      throw err;
    }
    ctx.status = 202;
    ctx.body = { ok: true, message: `Schedule ${schedule.id} of bot ${botId} runs now; its run is listed at GET /api/bots/${botId}/schedules/${schedule.id}/runs`, run: runAnswer(run) };
  });

  router.get('/api/bots/:bot_id/schedules/:schedule_id/runs', async (ctx) => {
    const { limit, before } = validateQuery(runsQuery, ctx.query);
    const botId = await botOf(ctx);
    const schedule = await scheduleOf(ctx, botId);
    const runs = await store.runs(schedule.id, limit ?? DEFAULT_RUNS, before === undefined ? undefined : Date.parse(before));
    ctx.body = { ok: true, runs: runs.map(runAnswer) };
  });

  return router;
}
