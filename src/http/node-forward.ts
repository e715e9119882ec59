import type { Context, Middleware } from 'koa';
import type { Dispatcher } from 'undici';
import { BOT_ID_MAX_LENGTH, BOT_ID_PATTERN } from '../bot-id.js';
import { NODE_NAME } from '../config.js';
import { HistoryUnavailable, NodeAway } from '../errors.js';
import { boundedJson, fleetRequest, reasonOf } from '../fleet/fleet-client.js';
import { addressToCall, NODE_AWAY_MS, urlOnNode } from '../fleet/node-beacon.js';
import type { NodeLocation } from '../fleet/node-beacon.js';
import type { PlacementFence } from '../fleet/placement-fence.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { PlatformPolicy } from './caller.js';
import { callerOf } from './caller.js';
import { carriesBody } from './json-body.js';

/** The lifecycle operations that name their bot in the body. */
const BY_BODY = /^\/api\/bots\/(restart|stop|start|logs)$/;
/** The routes that name their bot in the path. */
const IN_PATH = /^\/api\/(?:admin\/)?bots\/([^/]+)(?:\/|$)/;
/** How long the other node has to begin its answer beyond this agent's own lifecycle deadline. */
const MARGIN_MS = 5_000;
/** How often a node whose answer is awaited is looked up: whether it still renews its row. */
const AWAY_CHECK_MS = 5_000;
/** The request headers passed on: what the routes read; never the caller's Authorization or cookies. */
const PASSED_ON = ['content-type', 'accept', 'last-event-id'];
/** The answer's headers passed back beside its body and status. */
const PASSED_BACK = ['retry-after', 'cache-control', 'x-accel-buffering'];
/**
 * The most of another node's answer read (a stream's aside): a logs answer's 4 MiB of text (docs/api.md §6) and
 * its JSON escapes, with room; a broken or hostile node cannot make this agent hold more.
 */
export const FORWARDED_MAX_BYTES = 16 * 1024 * 1024;

export interface NodeForwardDeps {
  readonly node: string;
  /** AGENT_FLEET_KEY: without it nothing is passed on. */
  readonly fleetKey: string | undefined;
  readonly driver: RuntimeDriver;
  readonly store: NodeLocator;
  /** Where the fleet places the bots this node holds a leftover copy of (docs/fleet.md). */
  readonly fence?: Pick<PlacementFence, 'placedElsewhere'> | undefined;
  readonly policy: PlatformPolicy;
  /** The longest a lifecycle operation waits here (AGENT_RESTART_TIMEOUT_MS): the other node gets as long. */
  readonly deadlineMs: number;
}

/** Where the fleet's nodes are (src/fleet/node-beacon.ts). */
export interface NodeLocator {
  /** The node that holds the bot; undefined when none does. Throws when the store does not answer. */
  nodeOfBot(botId: string): Promise<NodeLocation | undefined>;
  /** The node of that name; undefined when the fleet has none. Throws when the store does not answer. */
  nodeNamed(name: string): Promise<NodeLocation | undefined>;
}

/** The node a create names (docs/api.md §17), where it names one. */
function nodeOfCreate(ctx: Context): string | undefined {
  if (ctx.method !== 'POST' || !/^\/api\/admin\/bots\/?$/.test(ctx.path)) return undefined;
  const named = (ctx.request.body as { node?: unknown } | undefined)?.node;
  return typeof named === 'string' && NODE_NAME.test(named) ? named : undefined;
}

/** A platform's removal of a bot, `DELETE /api/admin/bots/{bot_id}`. */
function isRemoval(ctx: Context): boolean {
  return ctx.method === 'DELETE' && /^\/api\/admin\/bots\/[^/]+\/?$/.test(ctx.path);
}

/** The bot a request names, where it names one. */
function botIdOf(ctx: Context): string | undefined {
  const named = ctx.method === 'POST' && BY_BODY.test(ctx.path) ? (ctx.request.body as { bot_id?: unknown } | undefined)?.bot_id : IN_PATH.exec(ctx.path)?.[1];
  return typeof named === 'string' && named.length <= BOT_ID_MAX_LENGTH && BOT_ID_PATTERN.test(named) ? named : undefined;
}

/**
 * A platform call for a bot another node of the fleet holds is passed to that node's agent and its answer
 * returned as it is, streams too (docs/api.md §17); a node that is away is a 503 at once, naming it. A bot's
 * own calls are never passed on: a bot manages only itself, through its own node's agent. A call passed on
 * is answered where it arrives, never passed again.
 */
export function forwardToNode({ node, fleetKey, driver, store, fence, policy, deadlineMs }: NodeForwardDeps): Middleware {
  /** Whether the request may be another node's, from what it says alone (no I/O). */
  function maybeElsewhere(ctx: Context): { createOn: string } | { botId: string } | undefined {
    const createOn = nodeOfCreate(ctx);
    if (createOn !== undefined) return createOn === node ? undefined : { createOn };
    const botId = botIdOf(ctx);
    if (botId === undefined) return undefined;
    // A leftover copy a cut move left here is not the bot: its calls are its placed node's, but for the
    // removal of this copy alone (docs/fleet.md).
    if (fence?.placedElsewhere(botId) !== undefined) return isRemoval(ctx) ? undefined : { botId };
    // Held here (or the index is being built: this node answers for itself as before); one look-up in memory.
    if (driver.holdsBot(botId) !== false) return undefined;
    return { botId };
  }

  return async (ctx, next) => {
    if (fleetKey === undefined || /^Fleet\s/i.test(ctx.get('authorization'))) return next();
    const named = maybeElsewhere(ctx);
    // Only the platform's calls are passed on, and the fleet's nodes read for them alone.
    if (named === undefined || (await callerOf(ctx, driver, policy)).kind !== 'platform') return next();
    let holder: NodeLocation | undefined;
    let what: string;
    if ('createOn' in named) {
      what = `creates on node ${named.createOn}`;
      // A node the fleet lacks: the create's own check says which node this agent is (422).
      holder = await store.nodeNamed(named.createOn).catch((err: unknown) => {
        throw new HistoryUnavailable(`the history's database does not answer: ${what} wait for it`, { cause: err });
      });
    } else {
      what = `bot ${named.botId}'s calls`;
      // Not this node's bot, and which node holds it cannot be read: a 503, not the 404 of a bot no node holds.
      holder = await store.nodeOfBot(named.botId).catch((err: unknown) => {
        throw new HistoryUnavailable(`the history's database does not answer: which node holds bot ${named.botId} cannot be read`, { cause: err });
      });
      if (holder !== undefined && holder.name !== node) ctx.state.botId = named.botId;
    }
    if (holder === undefined || holder.name === node) return next();
    ctx.state.node = holder.name;
    const address = addressToCall(holder, `${what} wait for it`);
    const name = holder.name;
    // Away only as the store says: a store that does not answer lets the call wait on to its deadline.
    const away = async (): Promise<boolean> => Date.now() - ((await store.nodeNamed(name))?.aliveMs ?? 0) >= NODE_AWAY_MS;
    await passOn(ctx, name, urlOnNode(address, ctx.path, ctx.querystring), fleetKey, deadlineMs + MARGIN_MS, away);
  };
}

async function passOn(ctx: Context, name: string, url: URL, fleetKey: string, deadlineMs: number, away: () => Promise<boolean>): Promise<void> {
  const headers: Record<string, string> = {};
  for (const header of PASSED_ON) {
    const value = ctx.get(header);
    if (value !== '') headers[header] = value;
  }
  // One id for the call in both agents' logs (docs/api.md §17).
  if (typeof ctx.state.requestId === 'string') headers['x-request-id'] = ctx.state.requestId;
  const aborted = new AbortController();
  const deadline = setTimeout(() => aborted.abort(new Error(`no answer within ${deadlineMs} ms`)), deadlineMs);
  // The caller gone: so is the call passed on (a live stream's above all).
  const callerGone = (): void => aborted.abort(new Error('the caller went away'));
  ctx.req.once('close', callerGone);
  // A node gone while its answer is awaited (its host off: a kept-alive connection hears nothing) is let go once
  // it stops renewing its row, not at the deadline.
  const watch = setInterval(() => {
    void away().then((gone) => gone && aborted.abort(new Error('it stopped saying it is alive')), () => undefined);
  }, AWAY_CHECK_MS);
  const answered = (): void => clearInterval(watch);
  const done = (): void => {
    answered();
    clearTimeout(deadline);
    ctx.req.off('close', callerGone);
  };
  let answer: Dispatcher.ResponseData;
  try {
    answer = await fleetRequest(url, fleetKey, { method: ctx.method, headers, body: carriesBody(ctx) ? JSON.stringify(ctx.request.body) : undefined, signal: aborted.signal });
  } catch (err) {
    done();
    throw new NodeAway(`node ${name} does not answer: ${reasonOf(err)}`, { cause: err });
  }
  answered();
  const type = String(answer.headers['content-type'] ?? '');
  // Only what the agent itself answers is passed back: JSON, and a live stream.
  const stream = /^text\/event-stream\s*(;|$)/i.test(type);
  if (!stream && !/^application\/json\s*(;|$)/i.test(type)) {
    answer.body.on('error', () => undefined).destroy();
    done();
    throw new NodeAway(`node ${name} answered ${answer.statusCode} with ${type === '' ? 'no content type' : 'a content type'} the agent never answers with, not JSON`);
  }
  let body: unknown = answer.body;
  if (stream) {
    // A live stream lasts as long as its caller: only its beginning had a deadline.
    clearTimeout(deadline);
    answer.body.once('close', done);
    answer.body.on('error', () => undefined);
  } else {
    try {
      // A HEAD's answer has no body to read.
      body = ctx.method === 'HEAD' ? await answer.body.dump().then(() => undefined) : await boundedJson(answer.body, FORWARDED_MAX_BYTES);
    } catch (err) {
      throw new NodeAway(`node ${name} did not finish its answer: ${reasonOf(err)}`, { cause: err });
    } finally {
      done();
    }
  }
  ctx.status = answer.statusCode;
  ctx.set('X-Bot-Agent-Node', name);
  for (const header of PASSED_BACK) {
    const value = answer.headers[header];
    if (typeof value === 'string') ctx.set(header, value);
  }
  ctx.type = stream ? 'text/event-stream' : 'application/json';
  ctx.body = body;
}
