import { AlreadyExists } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import type { HistoryStore, Placement } from '../history/history-store.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { NODE_RENEW_MS } from './node-beacon.js';

/**
 * The fleet's placement of each bot a move took is its fence (docs/fleet.md): only the placed node's copy runs.
 * Every NODE_RENEW_MS this node looks at the placements of the bots its runtime holds: a copy placed on another
 * node (a cut move's leftover) that runs is stopped, and its `fenced` event kept; a copy placed here that a move
 * left to start (its new node's agent was cut off before it could) is started, once.
 */
export class PlacementFence {
  private readonly timer: NodeJS.Timeout;
  /** This node's copies that the fleet places on another node, as last read: the node each is placed on. */
  private elsewhere = new Map<string, string>();
  private keeping = false;
  private failing = false;

  constructor(
    private readonly store: Pick<HistoryStore, 'placementsOf' | 'place' | 'placementStarted'>,
    private readonly driver: Pick<RuntimeDriver, 'listedBots'>,
    readonly node: string,
    private readonly lifecycle: Pick<BotLifecycle, 'stop' | 'start'>,
    private readonly history: Pick<BotHistory, 'note'>,
    private readonly report: (what: string, err: unknown) => void,
    everyMs = NODE_RENEW_MS,
  ) {
    this.timer = setInterval(() => void this.keep(), everyMs).unref();
  }

  /** The bot's placement; undefined for a bot no move took. Throws when the store does not answer. */
  async placementOf(botId: string): Promise<Placement | undefined> {
    return (await this.store.placementsOf([botId]))[0];
  }

  /** Places the bot on `node` from the placement read; undefined when another writer came first. */
  place(botId: string, from: Placement | undefined, node: string, startPending: boolean): Promise<Placement | undefined> {
    return this.store.place(botId, from, node, startPending, Date.now());
  }

  /** The node the fleet places this node's copy of the bot on, where that is another node, as last read (no I/O). */
  placedElsewhere(botId: string): string | undefined {
    return this.elsewhere.get(botId);
  }

  /** The node another than this one the fleet places the bot on, read now; as last read when the store does not answer. */
  async placedElsewhereNow(botId: string): Promise<string | undefined> {
    try {
      const placed = await this.placementOf(botId);
      return placed !== undefined && placed.node !== this.node ? placed.node : undefined;
    } catch {
      return this.placedElsewhere(botId);
    }
  }

  /**
   * Starts the bot a move placed here (its source asks once the placement names this node): AlreadyExists
   * (409) when the fleet places it on another node, whose copy alone may run.
   */
  async startPlaced(botId: string): Promise<void> {
    const placed = await this.placementOf(botId);
    if (placed === undefined || placed.node !== this.node) {
      throw new AlreadyExists(`bot ${botId} is not placed on node ${this.node}${placed ? ` but on node ${placed.node}` : ''}: its copy here does not start`);
    }
    await this.lifecycle.start(botId);
    if (placed.startPending) await this.store.placementStarted(botId, placed.generation);
  }

  /** One look at the placements of this node's bots; one at a time. */
  async keep(): Promise<void> {
    const listed = this.driver.listedBots();
    if (this.keeping || listed === undefined) return;
    this.keeping = true;
    try {
      const placements = await this.store.placementsOf(listed.map((bot) => bot.bot_id));
      const running = new Set(listed.filter((bot) => bot.state === 'running').map((bot) => bot.bot_id));
      const elsewhere = new Map<string, string>();
      for (const placed of placements) {
        if (placed.node !== this.node) {
          elsewhere.set(placed.botId, placed.node);
          if (running.has(placed.botId)) await this.fence(placed);
        } else if (placed.startPending) {
          await this.startPlaced(placed.botId).catch((err: unknown) => this.report(`bot ${placed.botId}, moved here, could not be started`, err));
        }
      }
      this.elsewhere = elsewhere;
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.report(`the placements of node ${this.node}'s bots could not be read`, err);
      this.failing = true;
    } finally {
      this.keeping = false;
    }
  }

  /** A copy that runs here while the fleet places the bot elsewhere: stopped, and said. */
  private async fence(placed: Placement): Promise<void> {
    try {
      await this.lifecycle.stop(placed.botId);
      await this.history.note(placed.botId, 'fenced', { node: this.node, placed_on: placed.node });
    } catch (err) {
      this.report(`bot ${placed.botId}'s copy on node ${this.node} runs, though the fleet places it on node ${placed.node}, and could not be stopped`, err);
    }
  }

  close(): void {
    clearInterval(this.timer);
  }
}
