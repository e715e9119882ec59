import type { BackOff, BotHistory } from '../history/bot-history.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';

/**
 * Crash back-offs under a bot's restart policy (docs/api.md §13): the bot held stopped for its wait, then
 * started, unless a start, stop, give-up or deploy came meanwhile (its `backing-off` event is then no longer
 * its latest). The wait is read back from the history at start, so one the agent died in is carried out by
 * the next; every agent may carry one out, a start of a running bot being no change.
 */
export class CrashBackOffs {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** How many operations were asked for each bot through the API: a wait that saw another count starts nothing. */
  private readonly asks = new Map<string, number>();
  private closed = false;

  constructor(
    private readonly lifecycle: Pick<BotLifecycle, 'stop' | 'start'>,
    private readonly history: Pick<BotHistory, 'pendingBackOffs'>,
    private readonly report: (what: string, err: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** Stops the bot (the run the runtime began after the crash), and starts it once its wait is over. */
  async hold(backOff: BackOff): Promise<void> {
    this.schedule(backOff);
    await this.lifecycle.stop(backOff.botId).catch((err: unknown) => this.report(`bot ${backOff.botId} backs off after a crash but could not be stopped`, err));
  }

  /** Takes up the back-offs the history holds (an agent stopped or killed during one left it). */
  async resume(): Promise<void> {
    const pending = await this.history.pendingBackOffs(this.now()).catch((err: unknown) => {
      this.report('the pending crash back-offs could not be read', err);
      return [];
    });
    for (const backOff of pending) this.schedule(backOff);
  }

  /**
   * An operation was asked for the bot (a stop, a start, a deploy...): its back-off is over, here at once (the
   * history says so a moment later, for the other agents). Heard before the operation waits its turn, so a wait
   * that ends meanwhile never starts the bot after it.
   */
  asked(botId: string): void {
    clearTimeout(this.timers.get(botId));
    this.timers.delete(botId);
    this.asks.set(botId, (this.asks.get(botId) ?? 0) + 1);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private schedule(backOff: BackOff): void {
    if (this.closed) return;
    clearTimeout(this.timers.get(backOff.botId));
    const asks = this.asks.get(backOff.botId) ?? 0;
    const timer = setTimeout(() => void this.due(backOff, asks), Math.max(0, backOff.untilMs - this.now()));
    this.timers.set(backOff.botId, timer);
  }

  private async due(backOff: BackOff, asks: number): Promise<void> {
    this.timers.delete(backOff.botId);
    try {
      const pending = await this.history.pendingBackOffs(this.now());
      if (!pending.some((other) => other.botId === backOff.botId && other.seq === backOff.seq)) return;
      if ((this.asks.get(backOff.botId) ?? 0) !== asks || this.closed) return;
      await this.lifecycle.start(backOff.botId);
    } catch (err) {
      this.report(`bot ${backOff.botId} could not be started after its crash back-off`, err);
    }
  }
}
