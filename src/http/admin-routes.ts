import Router from '@koa/router';
import type { Context } from 'koa';
import { Forbidden, messages, NotFound, NotImplemented, Unprocessable } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import type { BotTokenVerifier } from '../identity/bot-tokens.js';
import { DEFAULT_DEADLINE_S, DEFAULT_MIN_READY_S } from '../deploys/deploys.js';
import type { DeployRequest, Deploys } from '../deploys/deploys.js';
import type { BotHealthSpec, BotSpec } from '../provisioning/bot-spec.js';
import type { Provisioner, RemovedBot } from '../provisioning/provisioner.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { askerOf } from './audit.js';
import { pullEvents } from './pull-events.js';
import type { Audit } from './audit.js';
import type { Access } from './access.js';
import type { LogCollector } from '../log-history/log-collector.js';
import type { PlacementFence } from '../fleet/placement-fence.js';
import { botIdInPath, createBotRequest, deployRequest, listBotsQuery, removeBotQuery, validate, validateQuery } from './schemas.js';
import type { CreateBotBody, DeployBody, HealthRequest } from './schemas.js';

export interface AdminRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly provisioner: Provisioner | undefined;
  /** Deploys and rollbacks, where the runtime has revisions (docs/api.md §15). */
  readonly deploys?: Deploys | undefined;
  readonly access: Access;
  readonly audit: Audit;
  /** Forgets a removed bot's records and events. */
  readonly history: BotHistory;
  /** False (AGENT_PROVISIONING=off): create and remove are refused; listing stays. */
  readonly provisioning: boolean;
  /** Signs the bots' tokens (Docker); none: the token route answers 501. */
  readonly botTokens?: BotTokenVerifier | undefined;
  /** This agent's node (docs/api.md §17), which holds every bot it lists. */
  readonly node: string;
  /** Where the fleet places moved bots: a leftover copy's removal is of that copy alone (docs/fleet.md). */
  readonly fence?: Pick<PlacementFence, 'placedElsewhereNow'> | undefined;
  /** Forgets a removed bot's log history (docs/api.md §21). */
  readonly logHistory?: Pick<LogCollector, 'forget'> | undefined;
}

/** Creating, listing and removing bots: the platform's alone (loopback or the admin token), never a bot's. */
export function adminRoutes({ driver, provisioner, deploys, access, audit, history, botTokens, provisioning: provisioningOn, node, fence, logHistory }: AdminRoutesDeps): Router {
  const router = new Router({ prefix: '/api/admin/bots' });

  async function platformOnly(ctx: Context): Promise<Provisioner> {
    await access.platformFor(ctx, messages.platformOnly);
    if (!provisioner) throw new NotImplemented(`creating bots is not available on the ${driver.runtime} runtime yet`);
    return provisioner;
  }

  /** Create and remove: the platform's, and only while provisioning is on. */
  async function provisioningFor(ctx: Context): Promise<Provisioner> {
    const allowed = await platformOnly(ctx);
    if (!provisioningOn) throw new Forbidden(messages.provisioningOff);
    return allowed;
  }

  router.post('/', async (ctx) => {
    const body = validate(createBotRequest, ctx.request.body);
    const provisioning = await provisioningFor(ctx);
    ctx.state.botId = body.bot_id;
    // Another node's create came here only where nothing passes it on (docs/api.md §17).
    if (body.node !== undefined && body.node !== node) {
      throw new Unprocessable(`this agent is node ${node}, and node ${body.node} is not one this agent passes creates to: the fleet's nodes are listed at GET /api/admin/nodes (docs/api.md §17)`);
    }
    await audit(askerOf(ctx), 'create', body.bot_id, () => provisioning.create(specOfCreate(body), pullEvents(history, body.bot_id)));
    // Revision 1, where the runtime keeps revisions (docs/api.md §15).
    if (deploys) await deploys.created(body.bot_id, 'platform');
    ctx.status = 201;
    ctx.body = { ok: true, message: `Bot ${body.bot_id} created and started` };
  });

  router.get('/', async (ctx) => {
    const { user_id, limit, after } = validateQuery(listBotsQuery, ctx.query);
    const provisioning = await platformOnly(ctx);
    const bots = (await provisioning.list(user_id)).sort((a, b) => (a.bot_id < b.bot_id ? -1 : a.bot_id > b.bot_id ? 1 : 0));
    // A page: the bots after the cursor, in the order of their ids; `next` names the last of a page that has more after it.
    const rest = after === undefined ? bots : bots.filter((bot) => bot.bot_id > after);
    const page = limit === undefined ? rest : rest.slice(0, limit);
    const next = page.length < rest.length ? page.at(-1)?.bot_id : undefined;
    ctx.body = { ok: true, total: bots.length, bots: page.map((bot) => ({ ...bot, node })), ...(next === undefined ? {} : { next }) };
  });

  // The token of a bot the platform makes itself, for its PLATFORM_AGENT_TOKEN: asked for before the bot exists
  // (bound to its id), or after (bound to the value it was made with, where it carries one: docs/api.md §4).
  router.post('/:bot_id/token', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await access.platformFor(ctx, messages.platformOnly);
    if (!botTokens?.sign) throw new NotImplemented(`the ${driver.runtime} runtime's bots present tokens of its own (docs/api.md §4)`);
    ctx.state.botId = botId;
    const generation = await driver.botGeneration?.(botId);
    ctx.body = { ok: true, token: botTokens.sign(botId, generation ?? undefined) };
  });

  /** Deploys: the platform's, while provisioning is on, where the runtime has revisions. */
  async function deploysFor(ctx: Context): Promise<Deploys> {
    await provisioningFor(ctx);
    if (!deploys) throw new NotImplemented(`deploys are not available on the ${driver.runtime} runtime yet`);
    return deploys;
  }

  router.patch('/:bot_id', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const body = validate(deployRequest, ctx.request.body);
    const deploying = await deploysFor(ctx);
    ctx.state.botId = botId;
    const revision = await audit(askerOf(ctx), 'deploy', botId, () =>
      deploying.deploy(
        botId,
        deployOf(body),
        'platform',
        pullEvents(history, botId),
      ),
    );
    ctx.status = 202;
    ctx.body = { ok: true, message: `Bot ${botId}: revision ${revision} started; it is judged now (GET /api/bots/${botId}/revisions)`, revision };
  });

  router.post('/:bot_id/rollback', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const deploying = await deploysFor(ctx);
    ctx.state.botId = botId;
    const { from, to } = await audit(askerOf(ctx), 'rollback', botId, () => deploying.rollback(botId, 'platform'));
    ctx.body = { ok: true, message: `Bot ${botId} rolled back from revision ${from} to revision ${to}`, revision: to };
  });

  router.delete('/:bot_id', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const keepData = validateQuery(removeBotQuery, ctx.query).keep_data === 'true';
    const provisioning = await provisioningFor(ctx);
    ctx.state.botId = botId;
    const placedOn = await fence?.placedElsewhereNow(botId);
    if (placedOn !== undefined) {
      // The copy a cut move left here: it goes, and nothing of the bot, which runs on the node it is placed on; its
      // data here stays, for the operator to look at (docs/api.md §19).
      await audit(askerOf(ctx), 'remove', botId, () => provisioning.remove(botId, { keepData: true }));
      ctx.body = { ok: true, message: `Bot ${botId}'s leftover copy removed from node ${node}: the bot is placed on node ${placedOn}, and stays there` };
      return;
    }
    let removed: RemovedBot;
    try {
      removed = await audit(askerOf(ctx), 'remove', botId, () => provisioning.remove(botId, { keepData }));
    } catch (err) {
      // Its container gone already (a removal cut short before): what the history keeps of it still goes.
      if (err instanceof NotFound) {
        logHistory?.forget(botId);
        await history.forget(botId);
      }
      throw err;
    }
    logHistory?.forget(botId);
    // Kept like any write: while the database is away it waits in the spool (docs/api.md §11).
    await history.forget(botId);
    ctx.body = { ok: true, message: `Bot ${botId} removed${dataSaid(removed.dataFolders, keepData)}` };
  });

  return router;
}

/** What a removal's answer says of the bot's data (docs/api.md §19): nothing for a bot that kept none. */
function dataSaid(folders: readonly string[], kept: boolean): string {
  if (folders.length === 0) return '';
  const named = folders.join(', ');
  return kept ? `; its data (${named}) is kept: a create of it with the same data folders takes it up again` : `, with its data (${named})`;
}

/** A deploy's body (PATCH, or a schedule's `deploy` action) as Deploys takes it, with its defaults (docs/api.md §15). */
export function deployOf(body: DeployBody): DeployRequest {
  return {
    change: {
      image: body.image,
      env: body.env,
      command: body.command,
      memoryLimitBytes: body.memory_limit,
      cpuLimit: body.cpu_limit,
      health: healthOf(body.health),
      registryLogin: body.registry_auth,
    },
    minReadyS: body.min_ready_s ?? DEFAULT_MIN_READY_S,
    deadlineS: body.deadline_s ?? DEFAULT_DEADLINE_S,
    rollback: body.rollback ?? true,
  };
}

/** The bot a create's body asks for, as the runtime takes it. */
export function specOfCreate(body: CreateBotBody): BotSpec {
  return {
    id: body.bot_id,
    ownerId: body.user_id,
    image: body.image,
    template: body.template,
    token: body.token,
    domain: body.domain,
    port: body.port,
    env: body.env ?? {},
    memoryLimitBytes: body.memory_limit,
    cpuLimit: body.cpu_limit,
    command: body.command,
    init: body.init,
    health: healthOf(body.health),
    restartPolicy: body.restart_policy && {
      maxCrashes: body.restart_policy.max_crashes,
      windowS: body.restart_policy.window_s,
      backoffS: body.restart_policy.backoff_s,
      backoffMaxS: body.restart_policy.backoff_max_s,
    },
    registryLogin: body.registry_auth,
    data: body.data?.map((folder) => ({ path: folder.path, sizeMb: folder.size_mb })),
  };
}

/** A create's or deploy's `health` block as the runtime takes it, with its defaults (docs/api.md §13). */
function healthOf(health: HealthRequest | undefined): BotHealthSpec | undefined {
  return (
    health && {
      exec: health.exec,
      intervalS: health.interval_s ?? 10,
      timeoutS: health.timeout_s ?? 5,
      retries: health.retries ?? 3,
      startPeriodS: health.start_period_s ?? 0,
      heartbeatTtlS: health.heartbeat?.ttl_s,
      graceS: health.grace_s,
    }
  );
}
