import { HistoryUnavailable, NodeAway } from '../errors.js';
import type { HistoryStore, NodeBot, NodeRecord, StoredNode } from '../history/history-store.js';
import { NodeSeal } from './node-seal.js';
import type { BotSummary } from '../provisioning/bot-spec.js';
import type { RuntimeDriver } from '../runtime/driver.js';

/** How often an agent says its node is alive, and which bots its runtime holds. */
export const NODE_RENEW_MS = 5_000;
/** A node not renewed for this long is away (three renewals missed). */
export const NODE_AWAY_MS = 15_000;
/**
 * How often a node's bots are written even unchanged: a row another node took for a moment (a move's, written
 * by the old node a moment after the new one's) is this node's again within a minute (docs/api.md §17).
 */
export const REWRITE_MS = 60_000;
/** How far ahead of this agent's clock a node's liveness may be: further is a row no agent of the fleet wrote now. */
export const CLOCK_AHEAD_MS = 60_000;

/** A node of the fleet as its agent last said: its address, and when it last renewed its row. */
export interface NodeLocation {
  readonly name: string;
  /** Null where it says none, and where its row is refused. */
  readonly url: string | null;
  readonly aliveMs: number;
  /** Why its row is not taken for a node of the fleet's (docs/api.md §17): no call goes there. */
  readonly refused?: string;
}

/**
 * The address a call for another node goes to, where that node may be called now; else a NodeAway saying why,
 * followed by `then` (what waits, or stays).
 */
export function addressToCall(node: NodeLocation, then: string): string {
  if (node.refused !== undefined) throw new NodeAway(`node ${node.name} is not taken for one of the fleet's: ${node.refused}: ${then}`);
  if (node.url === null) throw new NodeAway(`node ${node.name} says no address the other agents reach it at (AGENT_NODE_URL): ${then}`);
  if (Date.now() - node.aliveMs >= NODE_AWAY_MS) throw new NodeAway(`node ${node.name} does not answer (last seen ${new Date(node.aliveMs).toISOString()}): ${then}`);
  return node.url;
}

/** `path` (with its query, if any) on the node at `base`: only its path is the caller's, never its host. */
export function urlOnNode(base: string, path: string, query = ''): URL {
  const url = new URL(base);
  url.pathname = path;
  url.search = query;
  return url;
}

/** A node as GET /api/admin/nodes answers it (docs/api.md §17). */
export interface NodeView {
  readonly node: string;
  readonly url: string | null;
  readonly alive: boolean;
  /** When its agent last said it is alive (ISO 8601). */
  readonly seen_at: string;
  readonly bots: number;
  readonly running: number;
  /** The node of the agent that answers. */
  readonly self: boolean;
  /** Why its row is not taken for a node of the fleet's; absent when it is. */
  readonly refused?: string;
}

/**
 * This agent's node in the fleet (docs/api.md §17): every NODE_RENEW_MS it renews its node's row in the
 * history's store and, when they changed, the bots its runtime holds. Agents that share one PostgreSQL
 * see each other's nodes; one over SQLite is a fleet of one.
 */
export class NodeBeacon {
  private readonly timer: NodeJS.Timeout;
  /** The bots last written, as a key, and when: unchanged, they are not written again until REWRITE_MS pass. */
  private written: string | undefined;
  private writtenList: readonly BotSummary[] | undefined;
  private writtenAtMs = 0;
  private renewing = false;
  /** The last renewal failed: told once until one succeeds (a database away fails every renewal). */
  private failing = false;
  /** Seals this node's row and checks the others' (AGENT_FLEET_KEY); without a key nothing is passed on, and rows are shown as read. */
  private readonly seal: NodeSeal | undefined;

  constructor(
    private readonly store: Pick<HistoryStore, 'renewNode' | 'putNodeBots' | 'nodes' | 'nodeOfBot' | 'botsOfNode' | 'isAway'>,
    private readonly driver: Pick<RuntimeDriver, 'listedBots'>,
    readonly node: string,
    private readonly url: string | undefined,
    fleetKey: string | undefined,
    private readonly report: (what: string, err: unknown) => void,
    private readonly now: () => number = Date.now,
    everyMs = NODE_RENEW_MS,
  ) {
    this.seal = fleetKey === undefined ? undefined : new NodeSeal(fleetKey);
    this.timer = setInterval(() => void this.renew(), everyMs).unref();
    void this.renew();
  }

  /** Says the node is alive, and which bots it holds where that changed; one renewal at a time. */
  async renew(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      const atMs = this.now();
      const url = this.url ?? null;
      await this.store.renewNode(this.node, url, atMs, this.seal?.of({ name: this.node, url, aliveMs: atMs }) ?? null);
      this.failing = false;
      const listed = this.driver.listedBots();
      // Undefined while the runtime's index is being built: nothing said rather than no bots.
      if (listed === undefined) return;
      // The very list written last (the driver's, while nothing changed): not worked over again.
      if (listed === this.writtenList && atMs - this.writtenAtMs < REWRITE_MS) return;
      const bots: NodeBot[] = listed.map((bot) => ({ botId: bot.bot_id, running: bot.state === 'running' })).sort((a, b) => (a.botId < b.botId ? -1 : 1));
      const key = JSON.stringify(bots);
      if (key === this.written && atMs - this.writtenAtMs < REWRITE_MS) {
        this.writtenList = listed;
        return;
      }
      await this.store.putNodeBots(this.node, bots, atMs);
      this.written = key;
      this.writtenList = listed;
      this.writtenAtMs = atMs;
    } catch (err) {
      if (!this.failing) this.report(`node ${this.node} could not be renewed in the history's store`, err);
      this.failing = true;
    } finally {
      this.renewing = false;
    }
  }

  /** Every node the store holds, this one first known alive as it answers. */
  async nodes(): Promise<NodeView[]> {
    const nowMs = this.now();
    let records: NodeRecord[];
    try {
      records = await this.store.nodes();
    } catch (err) {
      if (this.store.isAway(err)) throw new HistoryUnavailable("the history's database does not answer: the fleet's nodes wait for it", { cause: err });
      throw err;
    }
    return records.map((record) => {
      const { url, refused } = this.located(record, nowMs);
      return {
        node: record.name,
        url,
        alive: record.name === this.node || (refused === undefined && nowMs - record.aliveMs < NODE_AWAY_MS),
        seen_at: new Date(record.aliveMs).toISOString(),
        bots: record.bots,
        running: record.running,
        self: record.name === this.node,
        ...(refused === undefined ? {} : { refused }),
      };
    });
  }

  /** The node that holds the bot, as its agent last said; undefined when none does. Throws when the store does not answer. */
  async nodeOfBot(botId: string): Promise<NodeLocation | undefined> {
    const record = await this.store.nodeOfBot(botId);
    return record && this.located(record, this.now());
  }

  /** The bots the node holds as its agent last said. Throws when the store does not answer. */
  botsOf(name: string): Promise<NodeBot[]> {
    return this.store.botsOfNode(name);
  }

  /** The node of that name, as its agent last said; undefined when the fleet has none. Throws when the store does not answer. */
  async nodeNamed(name: string): Promise<NodeLocation | undefined> {
    const record = (await this.store.nodes()).find((row) => row.name === name);
    return record && this.located(record, this.now());
  }

  /**
   * A row as a node to call (docs/api.md §17): another node's only where it bears the fleet key's seal and says it
   * was alive no later than now (and a little clock skew); a refused row keeps its name and time, never its address.
   */
  private located({ name, url, aliveMs, seal }: StoredNode, nowMs: number): NodeLocation {
    if (this.seal === undefined || name === this.node) return { name, url, aliveMs };
    if (!this.seal.holds({ name, url, aliveMs }, seal)) return { name, url: null, aliveMs, refused: 'its row in the database does not bear the fleet key\'s seal' };
    if (aliveMs > nowMs + CLOCK_AHEAD_MS) return { name, url: null, aliveMs, refused: `its row says it is alive at ${new Date(aliveMs).toISOString()}, a time still to come` };
    return { name, url, aliveMs };
  }

  close(): void {
    clearInterval(this.timer);
  }
}
