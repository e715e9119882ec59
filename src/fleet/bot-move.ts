import { AlreadyExists, NodeAway, NotImplemented, OperationFailed, RefusedByNode, Unprocessable } from '../errors.js';
import type { Placement } from '../history/history-store.js';
import type { BotSpec } from '../provisioning/bot-spec.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { BotHistory } from '../history/bot-history.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { Backups } from '../backups/backups.js';
import { DATA_CARRY_MS } from './data-carry.js';
import { boundedJson, fleetRequest, reasonOf } from './fleet-client.js';
import { addressToCall, NODE_RENEW_MS, urlOnNode } from './node-beacon.js';
import type { NodeBeacon } from './node-beacon.js';
import type { PlacementFence } from './placement-fence.js';

/** The most of another node's answer to a create that is read: an envelope and its message. */
const ANSWER_MAX_BYTES = 64 * 1024;
/** How long a move waits for the fleet's table to say the bot's new node: two of that node's renewals. */
const SETTLE_MS = 2 * NODE_RENEW_MS + 1_000;

export interface BotMoveDeps {
  readonly node: string;
  /** AGENT_FLEET_KEY: without it no bot moves. */
  readonly fleetKey: string | undefined;
  readonly nodes: Pick<NodeBeacon, 'nodeNamed' | 'nodeOfBot'>;
  /** The runtime's name, for what it cannot do. */
  readonly runtime: string;
  /** Stops and starts after the bot's operations queued before (a deploy under way refuses them). */
  readonly lifecycle: Pick<BotLifecycle, 'stop' | 'start'>;
  /** The fleet's placements: a move changes the bot's only from what it read, and only the placed node's copy starts. */
  readonly placements: Pick<PlacementFence, 'placementOf' | 'place' | 'startPlaced'> | undefined;
  readonly provisioner: Provisioner | undefined;
  /** How long the other node has to make the bot: its image's pull (AGENT_PULL_TIMEOUT_S) and a margin. */
  readonly createDeadlineMs: number;
  /** Keeps the bot's `moved` event. */
  readonly history: Pick<BotHistory, 'note'>;
  readonly report: (what: string, err: unknown) => void;
  /** Where this agent keeps backups: a bot's data moves as one of its backups, taken here and restored there. */
  readonly backups: Pick<Backups, 'take' | 'takeIn' | 'markStopped' | 'unmarkStopped'> | undefined;
}

/** What a move did: where the bot was and is, and whether its new node started it (a bot that ran). */
export interface Moved {
  readonly from: string;
  readonly to: string;
  /** False: the bot ran, and its new node's agent did not say it started it; it starts it once it is back. */
  readonly started: boolean;
}

/**
 * Moves a bot this node holds to another node of the fleet (docs/api.md §17, docs/fleet.md): stops it here, has the
 * other node's agent make it again, stopped, as it is (its id, owner, token, variables, limits, check, policy,
 * revision and the very image it runs; its history is the fleet's already), places it there, and only then has
 * that agent start it (where it ran), and removes it here. The placement is the fence: refused by the other node,
 * or cut off before the placement, the bot runs here again; placed there, it never runs here again. Keeps its
 * `moved` event, and answers once the fleet's table names its new node, or a little later.
 */
export async function moveBot(deps: BotMoveDeps, botId: string, to: string): Promise<Moved> {
  const { node, fleetKey, nodes, lifecycle, provisioner, placements } = deps;
  if (fleetKey === undefined || placements === undefined) throw new Unprocessable('a bot moves only within a fleet: this agent has no AGENT_FLEET_KEY (docs/api.md §17)');
  if (to === node) throw new AlreadyExists(`bot ${botId} is on node ${node} already`);
  if (!provisioner?.exportBot) throw new NotImplemented(`moving bots between nodes is not available on the ${deps.runtime} runtime`);
  const target = await nodes.nodeNamed(to);
  if (target === undefined) throw new Unprocessable(`node ${to} is not one of the fleet's: its nodes are listed at GET /api/admin/nodes (docs/api.md §17)`);
  const address = addressToCall(target, `bot ${botId} stays on node ${node}`);
  const here = await placedHere(placements, botId, node);
  const { spec, running, imageId } = await provisioner.exportBot(botId);
  const keepsData = (spec.data ?? []).length > 0;
  if (keepsData && !deps.backups) throw new Unprocessable(`bot ${botId} keeps data, and this agent keeps no backups to carry it in (AGENT_DATA_DIR=:memory:): it stays on node ${node} (docs/api.md §19)`);
  if (running) {
    // Marked on disk first: an agent killed while the bot is stopped for its move starts it again when it is back,
    // if the fleet still places it here (docs/api.md §17).
    await deps.backups?.markStopped(botId);
    await lifecycle.stop(botId);
  }
  // Only while the fleet still places the bot here: once placed elsewhere, this copy never runs again.
  const runAgain = async (): Promise<void> => {
    if (!running) return;
    const placed = await placements.placementOf(botId).catch(() => here);
    if (placed?.node !== node) return;
    try {
      await lifecycle.start(botId);
      await deps.backups?.unmarkStopped(botId);
    } catch (err) {
      deps.report(`bot ${botId} was not moved, and did not start again on node ${node}`, err);
    }
  };
  let status: number;
  let answer: { msg?: unknown };
  try {
    const made = await fleetRequest(urlOnNode(address, '/api/fleet/bots'), fleetKey, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(createBodyOf(spec, imageId)),
      signal: AbortSignal.timeout(deps.createDeadlineMs),
    });
    status = made.statusCode;
    answer = ((await boundedJson(made.body, ANSWER_MAX_BYTES).catch(() => ({}))) ?? {}) as { msg?: unknown };
  } catch (err) {
    await runAgain();
    throw new NodeAway(`node ${to} does not answer: ${reasonOf(err)}; bot ${botId} stays on node ${node}`, { cause: err });
  }
  if (status !== 201) {
    await runAgain();
    throw refused(status, answer, `bot ${botId} was not moved to node ${to}`, node);
  }
  if (keepsData) {
    // Its data, as the stopped bot left it: a backup here, restored there into the copy made stopped. Cut off
    // before the placement, the bot runs here again with its data as it was; the copy there is never placed.
    try {
      await carryData(deps, botId, address, to);
    } catch (err) {
      await runAgain();
      throw err;
    }
  }
  let there: Placement | undefined;
  try {
    there = await placements.place(botId, here, to, running);
  } catch (err) {
    await runAgain();
    throw new OperationFailed(`bot ${botId} was made on node ${to}, stopped, but could not be placed there (${reasonOf(err)}); it stays on node ${node}`, { cause: err });
  }
  if (there === undefined) throw new AlreadyExists(`bot ${botId} was placed on another node while it was moved: it is not moved to node ${to}`);
  const started = !running || (await startThere(address, fleetKey, botId, deps.createDeadlineMs));
  // Placed there: this copy is not this node's to start again.
  if (running) await deps.backups?.unmarkStopped(botId);
  try {
    await provisioner.remove(botId);
  } catch (err) {
    throw new OperationFailed(`bot ${botId} was moved to node ${to}, but its stopped container on node ${node} could not be removed: ${reasonOf(err)}`, { cause: err });
  }
  await deps.history.note(botId, 'moved', { from_node: node, to_node: to, by: 'platform' });
  await settled(nodes, botId, to);
  return { from: node, to, started };
}

/** The bot's data folders backed up here, stopped as it is, and taken in by node `to`'s agent. */
async function carryData(deps: BotMoveDeps, botId: string, address: string, to: string): Promise<void> {
  const { backup } = await deps.backups!.take(botId, { mode: 'live' });
  let status: number;
  let answer: { msg?: unknown };
  try {
    const taken = await fleetRequest(urlOnNode(address, `/api/fleet/bots/${botId}/data`), deps.fleetKey!, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ from: deps.node, backup_id: backup.id }),
      signal: AbortSignal.timeout(DATA_CARRY_MS),
    });
    status = taken.statusCode;
    answer = ((await boundedJson(taken.body, ANSWER_MAX_BYTES).catch(() => ({}))) ?? {}) as { msg?: unknown };
  } catch (err) {
    throw new NodeAway(`node ${to} does not answer as it takes in bot ${botId}'s data: ${reasonOf(err)}; bot ${botId} stays on node ${deps.node}, its data as it was`, { cause: err });
  }
  if (status !== 200) throw refused(status, answer, `bot ${botId}'s data was not taken in by node ${to}`, deps.node);
}

/** Another node's refusal, in its words, with what became of the bot. */
function refused(status: number, answer: { msg?: unknown }, what: string, node: string): RefusedByNode {
  const why = typeof answer.msg === 'string' ? answer.msg.slice(0, 1_000) : `it answered ${status}`;
  return new RefusedByNode(status >= 400 && status < 600 ? status : 502, `${what}, which said: ${why}; it stays on node ${node}`);
}

/** The bot's placement, on this node: read, or made where no move took it yet. AlreadyExists when the fleet places it elsewhere. */
async function placedHere(placements: Pick<PlacementFence, 'placementOf' | 'place'>, botId: string, node: string): Promise<Placement> {
  const placed = (await placements.placementOf(botId)) ?? (await placements.place(botId, undefined, node, false)) ?? (await placements.placementOf(botId));
  if (placed === undefined || placed.node !== node) {
    throw new AlreadyExists(`bot ${botId} is placed on node ${placed?.node ?? 'another'}: its copy on node ${node} is a leftover of a move that was cut off, and is not moved (docs/fleet.md)`);
  }
  return placed;
}

/** Asks the bot's new node to start it, now that it is placed there; false when that agent did not say it did. */
async function startThere(address: string, fleetKey: string, botId: string, deadlineMs: number): Promise<boolean> {
  try {
    const answer = await fleetRequest(urlOnNode(address, `/api/fleet/bots/${botId}/start`), fleetKey, { method: 'POST', signal: AbortSignal.timeout(deadlineMs) });
    await answer.body.dump();
    return answer.statusCode === 200;
  } catch {
    return false;
  }
}

/** Waits until the fleet's table says the bot is on its new node (that node's next renewal), at most SETTLE_MS. */
async function settled(nodes: Pick<NodeBeacon, 'nodeOfBot'>, botId: string, to: string): Promise<void> {
  const until = Date.now() + SETTLE_MS;
  while (Date.now() < until) {
    const holder = await nodes.nodeOfBot(botId).catch(() => undefined);
    if (holder?.name === to) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** A create's body (docs/api.md §2) that makes the bot again as it is: its revision, and the image it runs. */
function createBodyOf(spec: BotSpec & { readonly revision: number }, imageId: string | undefined): Record<string, unknown> {
  const { health, restartPolicy } = spec;
  return {
    bot_id: spec.id,
    user_id: spec.ownerId,
    image: spec.image,
    template: spec.template,
    token: spec.token,
    domain: spec.domain,
    port: spec.port,
    env: spec.env,
    memory_limit: spec.memoryLimitBytes,
    cpu_limit: spec.cpuLimit,
    command: spec.command,
    init: spec.init,
    health: health && {
      exec: health.exec,
      interval_s: health.intervalS,
      timeout_s: health.timeoutS,
      retries: health.retries,
      start_period_s: health.startPeriodS,
      heartbeat: health.heartbeatTtlS === undefined ? undefined : { ttl_s: health.heartbeatTtlS },
      grace_s: health.graceS,
    },
    restart_policy: restartPolicy && {
      max_crashes: restartPolicy.maxCrashes,
      window_s: restartPolicy.windowS,
      backoff_s: restartPolicy.backoffS,
      backoff_max_s: restartPolicy.backoffMaxS,
    },
    data: spec.data?.map((folder) => ({ path: folder.path, size_mb: folder.sizeMb })),
    revision: spec.revision,
    image_id: imageId,
  };
}
