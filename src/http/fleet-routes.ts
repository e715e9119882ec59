import Router from '@koa/router';
import type { Context } from 'koa';
import { Forbidden, messages, NodeAway, NotFound, NotImplemented, Unprocessable } from '../errors.js';
import { boundedJson, fleetRequest, reasonOf } from '../fleet/fleet-client.js';
import { addressToCall, urlOnNode } from '../fleet/node-beacon.js';
import { takeInData } from '../fleet/data-carry.js';
import { drainNode } from '../fleet/node-drain.js';
import { moveBot } from '../fleet/bot-move.js';
import type { BotMoveDeps } from '../fleet/bot-move.js';
import type { Access } from './access.js';
import { specOfCreate } from './admin-routes.js';
import { askerOf } from './audit.js';
import type { Audit } from './audit.js';
import { botIdInPath, drainRequest, fleetCreateRequest, fleetDataRequest, moveRequest, pathNode, validate } from './schemas.js';

export interface FleetRoutesDeps {
  readonly move: BotMoveDeps;
  readonly access: Access;
  readonly audit: Audit;
  /** False (AGENT_PROVISIONING=off): bots are neither moved from nor made on this node. */
  readonly provisioning: boolean;
}

/** Moving a bot between the fleet's nodes and draining a node (docs/api.md §17): the platform's calls, and the agents' own route. */
export function fleetRoutes({ move, access, audit, provisioning }: FleetRoutesDeps): Router {
  const router = new Router();
  const { provisioner, node, runtime } = move;
  const fence = move.placements;

  /** A route only another agent of the fleet calls, with the fleet's key. */
  async function fleetOnly(ctx: Context): Promise<void> {
    await access.platformFor(ctx, messages.platformOnly);
    if (!/^Fleet\s/i.test(ctx.get('authorization'))) throw new Forbidden(messages.fleetOnly);
  }

  router.post('/api/admin/bots/:bot_id/move', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const { node: to } = validate(moveRequest, ctx.request.body);
    await access.platformFor(ctx, messages.platformOnly);
    if (!provisioning) throw new Forbidden(messages.provisioningOff);
    ctx.state.botId = botId;
    const moved = await audit(askerOf(ctx), 'move', botId, () => moveBot(move, botId, to));
    const pending = moved.started ? '' : `; node ${moved.to}'s agent did not say it started it: it starts it once it answers again`;
    ctx.body = { ok: true, message: `Bot ${botId} moved from node ${moved.from} to node ${moved.to}${pending}`, node: moved.to };
  });

  // Another agent makes here a bot it moves: as a create, with the bot's revision and image, stopped until placed here.
  router.post('/api/fleet/bots', async (ctx) => {
    // Only agents of the fleet may make a bot here: nothing of the body is judged for anyone else.
    await fleetOnly(ctx);
    const body = validate(fleetCreateRequest, ctx.request.body);
    if (!provisioner?.createStopped) throw new NotImplemented(`moving bots onto the ${runtime} runtime is not available`);
    if (!provisioning) throw new Forbidden(messages.provisioningOff);
    ctx.state.botId = body.bot_id;
    await audit(askerOf(ctx), 'create', body.bot_id, () => provisioner.createStopped!({ ...specOfCreate(body), revision: body.revision }, body.image_id));
    ctx.status = 201;
    ctx.body = { ok: true, message: `Bot ${body.bot_id} made on node ${node} at revision ${body.revision}, stopped until the fleet places it here` };
  });

  // The agent that moves a bot here with its data: its backup there, taken in and restored into the copy made here, stopped.
  router.post('/api/fleet/bots/:bot_id/data', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await fleetOnly(ctx);
    const { from, backup_id: backupId } = validate(fleetDataRequest, ctx.request.body);
    if (!provisioning) throw new Forbidden(messages.provisioningOff);
    ctx.state.botId = botId;
    const backup = await audit(askerOf(ctx), 'restore', botId, () => takeInData({ fleetKey: move.fleetKey, nodes: move.nodes, backups: move.backups }, botId, from, backupId));
    ctx.body = { ok: true, backup };
  });

  // The agent that moved a bot here, once the fleet places it here: its copy starts (docs/fleet.md).
  router.post('/api/fleet/bots/:bot_id/start', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await fleetOnly(ctx);
    if (!fence) throw new NotImplemented(`moving bots onto the ${runtime} runtime is not available`);
    ctx.state.botId = botId;
    await audit(askerOf(ctx), 'start', botId, () => fence.startPlaced(botId));
    ctx.body = { ok: true, message: `Bot ${botId} started on node ${node}, where the fleet places it` };
  });

  router.post('/api/admin/nodes/:node/drain', async (ctx) => {
    const drained = validate(pathNode, ctx.params.node);
    // No body: the bots are stopped.
    const to = validate(drainRequest, ctx.request.body)?.to;
    await access.platformFor(ctx, messages.platformOnlyNodes);
    if (!provisioning) throw new Forbidden(messages.provisioningOff);
    if (to === drained) throw new Unprocessable(`node ${drained} is not drained to itself`);
    if (drained !== node) {
      // Passed on already: answered here, never passed again.
      if (/^Fleet\s/i.test(ctx.get('authorization'))) throw new Unprocessable(`this agent is node ${node}, not node ${drained}`);
      await passDrainOn(ctx, move, drained, to);
      return;
    }
    if (!provisioner) throw new NotImplemented(`draining a node is not available on the ${runtime} runtime`);
    const bots = await drainNode(move, await provisioner.list(undefined), to);
    const count = (outcome: string) => bots.filter((bot) => bot.outcome === outcome).length;
    ctx.body = {
      ok: true,
      message: `node ${node} drained: ${count('moved')} bots moved, ${count('stopped')} stopped, ${count('failed')} not (each bot's outcome in bots)`,
      node,
      bots,
    };
  });

  return router;
}

/** How long a drain passed to another node's agent may take: its bots one at a time. */
const DRAIN_PASS_MS = 30 * 60_000;
/** The most of that agent's answer read: a drain of 10,000 bots, each with its words. */
const DRAIN_ANSWER_MAX_BYTES = 16 * 1024 * 1024;

/** A drain of another node is that node's agent's to carry out: passed on with the fleet's key, answered as it answers. */
async function passDrainOn(ctx: Context, move: BotMoveDeps, drained: string, to: string | undefined): Promise<void> {
  if (move.fleetKey === undefined) throw new Unprocessable(`this agent is node ${move.node}, and drains another node only within a fleet (AGENT_FLEET_KEY, docs/api.md §17)`);
  const target = await move.nodes.nodeNamed(drained);
  if (target === undefined) throw new NotFound(`node ${drained} is not one of the fleet's: its nodes are listed at GET /api/admin/nodes (docs/api.md §17)`);
  const address = addressToCall(target, 'its drain waits for it');
  let status: number;
  let body: unknown;
  try {
    const answer = await fleetRequest(urlOnNode(address, ctx.path), move.fleetKey, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to }),
      signal: AbortSignal.timeout(DRAIN_PASS_MS),
    });
    status = answer.statusCode;
    body = await boundedJson(answer.body, DRAIN_ANSWER_MAX_BYTES);
  } catch (err) {
    throw new NodeAway(`node ${drained} does not answer: ${reasonOf(err)}`, { cause: err });
  }
  ctx.set('X-Bot-Agent-Node', drained);
  ctx.status = status;
  ctx.body = body;
}
