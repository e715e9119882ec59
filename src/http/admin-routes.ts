import Router from '@koa/router';
import type { Context } from 'koa';
import { Forbidden, messages, NotFound, NotImplemented } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import type { BotTokenVerifier } from '../identity/bot-tokens.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { askerOf } from './audit.js';
import { pullEvents } from './pull-events.js';
import type { Audit } from './audit.js';
import type { Access } from './access.js';
import { botIdInPath, createBotRequest, listBotsQuery, validate, validateQuery } from './schemas.js';

export interface AdminRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly provisioner: Provisioner | undefined;
  readonly access: Access;
  readonly audit: Audit;
  /** Forgets a removed bot's records and events. */
  readonly history: BotHistory;
  /** False (AGENT_PROVISIONING=off): create and remove are refused; listing stays. */
  readonly provisioning: boolean;
  /** Signs the bots' tokens (Docker); none: the token route answers 501. */
  readonly botTokens?: BotTokenVerifier | undefined;
}

/** Creating, listing and removing bots: the platform's alone (loopback or the admin token), never a bot's. */
export function adminRoutes({ driver, provisioner, access, audit, history, botTokens, provisioning: provisioningOn }: AdminRoutesDeps): Router {
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
    await audit(askerOf(ctx), 'create', body.bot_id, () =>
      provisioning.create({
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
        health: body.health && {
          exec: body.health.exec,
          intervalS: body.health.interval_s ?? 10,
          timeoutS: body.health.timeout_s ?? 5,
          retries: body.health.retries ?? 3,
          startPeriodS: body.health.start_period_s ?? 0,
          heartbeatTtlS: body.health.heartbeat?.ttl_s,
          graceS: body.health.grace_s,
        },
        registryLogin: body.registry_auth,
      }, pullEvents(history, body.bot_id)),
    );
    ctx.status = 201;
    ctx.body = { ok: true, message: `Bot ${body.bot_id} created and started` };
  });

  router.get('/', async (ctx) => {
    const { user_id } = validateQuery(listBotsQuery, ctx.query);
    const provisioning = await platformOnly(ctx);
    ctx.body = { ok: true, bots: await provisioning.list(user_id) };
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

  router.delete('/:bot_id', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const provisioning = await provisioningFor(ctx);
    ctx.state.botId = botId;
    try {
      await audit(askerOf(ctx), 'remove', botId, () => provisioning.remove(botId));
    } catch (err) {
      // Its container gone already (a removal cut short before): what the history keeps of it still goes.
      if (err instanceof NotFound) await history.forget(botId);
      throw err;
    }
    // Kept like any write: while the database is away it waits in the spool (docs/api.md §11).
    await history.forget(botId);
    ctx.body = { ok: true, message: `Bot ${botId} removed` };
  });

  return router;
}
