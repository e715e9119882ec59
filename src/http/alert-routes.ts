import Router from '@koa/router';
import { BadRequest, messages, NotFound, Unprocessable } from '../errors.js';
import { ALERT_ID } from '../alerts/alert-store.js';
import type { AlertKind, AlertSpec, AlertStore, StoredAlert } from '../alerts/alert-store.js';
import type { Alerting } from '../alerts/alerting.js';
import { lineMatcher } from '../log-history/line-match.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Access } from './access.js';
import { alertRequest, validate } from './schemas.js';

/** A usage rule's window when the body names none, and any rule's cooldown (docs/api.md §22). */
const DEFAULT_WINDOW_S = 60;
const DEFAULT_COOLDOWN_S = 300;

/** The fields each kind takes beside name, bot_id, kind and cooldown_s. */
const FIELDS_OF: Record<AlertKind, readonly string[]> = {
  line: ['q', 'regex', 'stream'],
  cpu: ['above_percent', 'window_s'],
  memory: ['above_percent', 'window_s'],
  silence: ['silent_s'],
};
const KIND_FIELDS = ['q', 'regex', 'stream', 'above_percent', 'window_s', 'silent_s'] as const;

export interface AlertRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly alerts: { readonly store: AlertStore; readonly alerting: Alerting };
  /** Whether lines are kept (AGENT_LOG_HISTORY): line and silence rules watch the kept lines. */
  readonly linesKept: boolean;
  readonly access: Access;
}

/** A rule as an answer shows it. */
export const alertView = (rule: StoredAlert) => ({
  id: rule.id,
  name: rule.name,
  bot_id: rule.botId ?? null,
  kind: rule.kind,
  ...(rule.q === undefined ? {} : { q: rule.q }),
  ...(rule.regex === undefined ? {} : { regex: rule.regex }),
  ...(rule.stream === undefined ? {} : { stream: rule.stream }),
  ...(rule.abovePercent === undefined ? {} : { above_percent: rule.abovePercent }),
  ...(rule.windowS === undefined ? {} : { window_s: rule.windowS }),
  ...(rule.silentS === undefined ? {} : { silent_s: rule.silentS }),
  cooldown_s: rule.cooldownS,
  created_at: new Date(rule.createdMs).toISOString(),
});

/** The rule a body asks for: each kind's fields, and no other kind's. */
function alertSpecOf(body: ReturnType<typeof validate<typeof alertRequest>>): AlertSpec {
  const kind = body.kind as AlertKind;
  const foreign = KIND_FIELDS.find((field) => body[field] !== undefined && !FIELDS_OF[kind].includes(field));
  if (foreign !== undefined) throw new BadRequest(`${foreign} is not taken by a ${kind} rule (it takes ${FIELDS_OF[kind].join(', ')})`);
  if (kind === 'line' && body.q === undefined && body.regex === undefined) throw new BadRequest('a line rule needs q or regex');
  if ((kind === 'cpu' || kind === 'memory') && body.above_percent === undefined) throw new BadRequest(`a ${kind} rule needs above_percent`);
  if (kind === 'memory' && (body.above_percent ?? 0) > 100) throw new BadRequest('above_percent must be at most 100 for a memory rule (of the bot\'s memory limit)');
  if (kind === 'silence' && body.silent_s === undefined) throw new BadRequest('a silence rule needs silent_s');
  lineMatcher(body.q, body.regex);
  return {
    name: body.name,
    botId: body.bot_id,
    kind,
    q: body.q,
    regex: body.regex,
    stream: body.stream as AlertSpec['stream'],
    abovePercent: body.above_percent,
    windowS: kind === 'cpu' || kind === 'memory' ? (body.window_s ?? DEFAULT_WINDOW_S) : undefined,
    silentS: body.silent_s,
    cooldownS: body.cooldown_s ?? DEFAULT_COOLDOWN_S,
  };
}

/** Alert rules (docs/api.md §22): the platform's alone. */
export function alertRoutes({ driver, alerts, linesKept, access }: AlertRoutesDeps): Router {
  const router = new Router({ prefix: '/api/admin/alerts' });

  const ruleOf = async (id: string | undefined): Promise<StoredAlert> => {
    if (id === undefined || !ALERT_ID.test(id)) throw new BadRequest('alert_id must be alr_ and 16 hex digits, as a rule\'s id is');
    const rule = await alerts.store.get(id);
    if (rule === undefined) throw new NotFound(`no alert rule ${id}`);
    return rule;
  };

  router.post('/', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyAlerts);
    const body: unknown = ctx.request.body;
    const unknown = body !== null && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body).filter((field) => !Object.hasOwn(alertRequest.fields, field)) : [];
    if (unknown.length > 0) throw new BadRequest(`unknown field ${JSON.stringify(unknown[0]!.slice(0, 64))}: a rule takes ${Object.keys(alertRequest.fields).join(', ')}`);
    const spec = alertSpecOf(validate(alertRequest, body));
    if ((spec.kind === 'line' || spec.kind === 'silence') && !linesKept) {
      throw new Unprocessable(`a ${spec.kind} rule watches the lines the log history keeps, and this agent keeps none: AGENT_LOG_HISTORY is off`);
    }
    if (spec.botId !== undefined) await driver.findBot(spec.botId);
    const rule = await alerts.store.add(spec, Date.now());
    await alerts.alerting.refresh();
    ctx.status = 201;
    ctx.body = { ok: true, message: `Alert rule ${rule.id} made`, alert: alertView(rule) };
  });

  router.get('/', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyAlerts);
    ctx.body = { ok: true, alerts: (await alerts.store.all()).map(alertView) };
  });

  router.get('/:alert_id', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyAlerts);
    ctx.body = { ok: true, alert: alertView(await ruleOf(ctx.params.alert_id)) };
  });

  router.delete('/:alert_id', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyAlerts);
    const rule = await ruleOf(ctx.params.alert_id);
    await alerts.store.remove(rule.id);
    await alerts.alerting.refresh();
    ctx.body = { ok: true, message: `Alert rule ${rule.id} removed` };
  });

  return router;
}
