import { AlreadyExists, NodeAway, NotImplemented, OperationFailed, RefusedByNode, Unprocessable } from '../errors.js';
import type { BotSpec } from '../provisioning/bot-spec.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { BotHistory } from '../history/bot-history.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import { boundedJson, fleetRequest, reasonOf } from './fleet-client.js';
import { addressToCall, NODE_RENEW_MS, urlOnNode } from './node-beacon.js';
import type { NodeBeacon } from './node-beacon.js';

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
  readonly provisioner: Provisioner | undefined;
  /** How long the other node has to make the bot: its image's pull (AGENT_PULL_TIMEOUT_S) and a margin. */
  readonly createDeadlineMs: number;
  /** Keeps the bot's `moved` event. */
  readonly history: Pick<BotHistory, 'note'>;
  readonly report: (what: string, err: unknown) => void;
}

/**
 * Moves a bot this node holds to another node of the fleet (docs/api.md §17): stops it here, has the other
 * node's agent make it again as it is (its id, owner, token, variables, limits, check, policy and revision;
 * its history is the fleet's already), then removes it here. Refused by the other node, the bot runs here
 * again as it ran. Keeps its `moved` event, and answers once the fleet's table names its new node, or a little later.
 */
export async function moveBot(deps: BotMoveDeps, botId: string, to: string): Promise<{ readonly from: string; readonly to: string }> {
  const { node, fleetKey, nodes, lifecycle, provisioner } = deps;
  if (fleetKey === undefined) throw new Unprocessable('a bot moves only within a fleet: this agent has no AGENT_FLEET_KEY (docs/api.md §17)');
  if (to === node) throw new AlreadyExists(`bot ${botId} is on node ${node} already`);
  if (!provisioner?.exportBot) throw new NotImplemented(`moving bots between nodes is not available on the ${deps.runtime} runtime`);
  const target = await nodes.nodeNamed(to);
  if (target === undefined) throw new Unprocessable(`node ${to} is not one of the fleet's: its nodes are listed at GET /api/admin/nodes (docs/api.md §17)`);
  const address = addressToCall(target, `bot ${botId} stays on node ${node}`);
  const { spec, running } = await provisioner.exportBot(botId);
  if (running) await lifecycle.stop(botId);
  const runAgain = async (): Promise<void> => {
    if (running) await lifecycle.start(botId).catch((err: unknown) => deps.report(`bot ${botId} was not moved, and did not start again on node ${node}`, err));
  };
  let status: number;
  let answer: { msg?: unknown };
  try {
    const made = await fleetRequest(urlOnNode(address, '/api/fleet/bots'), fleetKey, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(createBodyOf(spec, running)),
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
    const why = typeof answer.msg === 'string' ? answer.msg.slice(0, 1_000) : `it answered ${status}`;
    throw new RefusedByNode(status >= 400 && status < 600 ? status : 502, `bot ${botId} was not moved to node ${to}, which said: ${why}; it stays on node ${node}`);
  }
  try {
    await provisioner.remove(botId);
  } catch (err) {
    throw new OperationFailed(`bot ${botId} was made on node ${to}, but its stopped container on node ${node} could not be removed: ${reasonOf(err)}`, { cause: err });
  }
  await deps.history.note(botId, 'moved', { from_node: node, to_node: to, by: 'platform' });
  await settled(nodes, botId, to);
  return { from: node, to };
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

/** A create's body (docs/api.md §2) that makes the bot again as it is, with its revision and whether it runs. */
function createBodyOf(spec: BotSpec & { readonly revision: number }, running: boolean): Record<string, unknown> {
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
    revision: spec.revision,
    running,
  };
}
