import type { BackOff, BotHistory } from '../history/bot-history.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import { NotFound } from '../errors.js';
import type { RuntimeDriver } from '../runtime/driver.js';

/** How often the bots whose crashes the agent restarts are looked at, to hand them back to the engine. */
const SWEEP_MS = 10_000;

/**
 * Crash back-offs under a bot's restart policy (docs/api.md §13): the bot held stopped for its wait, then
 * started, unless a start, stop, give-up or deploy came meanwhile (its `backing-off` event is then no longer
 * its latest). The wait is read back from the history at start, so one the agent died in is carried out by
 * the next; every agent may carry one out, a start of a running bot being no change.
 *
 * On Docker the engine restarts a crash at once, before any agent could hold it: the driver takes a crashed
 * bot's restarts from the engine as it crashes, the agent restarts each of its crashes (the first at once)
 * and hands them back once the bot runs with no crash in its window.
 */
export class CrashBackOffs {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** How many operations were asked for each bot through the API: a wait that saw another count starts nothing. */
  private readonly asks = new Map<string, number>();
  /** The holds of each bot, in turn. */
  private readonly inTurn = new Map<string, Promise<void>>();
  private readonly sweeper: NodeJS.Timeout;
  private sweeping = false;
  private closed = false;

  constructor(
    private readonly lifecycle: Pick<BotLifecycle, 'stop' | 'start'>,
    private readonly history: Pick<BotHistory, 'pendingBackOffs' | 'crashedSince' | 'unansweredCrashes'>,
    private readonly driver: Pick<RuntimeDriver, 'findBot' | 'engineRestarts' | 'agentRestartedBots' | 'takeCrashRestarts'>,
    private readonly report: (what: string, err: unknown) => void,
    /** The bots in this agent's care (tests sharing one engine keep to their own). */
    private readonly inCare: (botId: string) => boolean = () => true,
    private readonly now: () => number = Date.now,
    sweepMs = SWEEP_MS,
  ) {
    driver.takeCrashRestarts?.(inCare);
    this.sweeper = setInterval(() => void this.sweep(), sweepMs).unref();
  }

  /** A crash of a bot with a restart policy: stops the bot (the run the runtime began after it) when it is to wait, and starts it once its wait is over. */
  hold(backOff: BackOff): Promise<void> {
    // What is asked from here on ends this back-off, even while it waits its turn behind an older one (seen on a busy
    // host: a stop asked as the back-off was kept, its hold begun after it, and the bot started once the wait was over).
    const asks = this.asks.get(backOff.botId) ?? 0;
    // One bot's holds one after another: a newer one's start never comes before an older one's stop.
    const held = (this.inTurn.get(backOff.botId) ?? Promise.resolve()).then(() => this.holdNow(backOff, asks));
    this.inTurn.set(backOff.botId, held);
    void held.then(() => {
      if (this.inTurn.get(backOff.botId) === held) this.inTurn.delete(backOff.botId);
    });
    return held;
  }

  private async holdNow(backOff: BackOff, asks: number): Promise<void> {
    const { botId } = backOff;
    // Nothing to wait (the first crash in the window): the runtime's to restart, unless the agent took that over.
    if (backOff.seq === undefined) {
      if (this.driver.engineRestarts !== undefined) this.schedule(backOff, asks);
      return;
    }
    // Nothing left to wait (its record came after its wait: a busy host, the spool's replay after an outage): not
    // stopped, started at once where nothing else starts it (a start of a running bot changes nothing).
    if (backOff.untilMs <= this.now()) {
      this.schedule(backOff, asks);
      return;
    }
    // Stopped first, then its wait begins: a start due while the stop waited its turn would be stopped by it (seen on
    // a busy host: the bot stayed stopped).
    clearTimeout(this.timers.get(botId));
    this.timers.delete(botId);
    try {
      await this.driver.engineRestarts?.(botId, false);
      await this.lifecycle.stop(botId);
    } catch (err) {
      this.report(`bot ${botId} backs off after a crash but could not be stopped`, err);
    }
    // A newer back-off of the bot waits its turn behind this one, and replaces its timer.
    this.schedule(backOff, asks);
  }

  /** Takes up the back-offs the history holds (an agent stopped or killed during one left it), and the crashes left to the agent that nothing restarted. */
  async resume(): Promise<void> {
    try {
      const pending = (await this.history.pendingBackOffs(this.now())).filter((backOff) => this.inCare(backOff.botId));
      for (const backOff of pending) this.schedule(backOff);
      const held = ((await this.driver.agentRestartedBots?.()) ?? []).filter(this.inCare);
      const waiting = new Set(pending.map((backOff) => backOff.botId));
      for (const botId of await this.history.unansweredCrashes(held, this.now())) {
        if (!waiting.has(botId)) this.schedule({ botId, untilMs: this.now(), seq: undefined });
      }
    } catch (err) {
      this.report('the pending crash back-offs could not be read', err);
    }
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

  /** Resolves once the holds under way have stopped their bots: an agent that stops leaves no crash it kept a back-off for running. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.inTurn.values()]);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private schedule(backOff: BackOff, asks = this.asks.get(backOff.botId) ?? 0): void {
    if (this.closed) return;
    clearTimeout(this.timers.get(backOff.botId));
    const timer = setTimeout(() => void this.due(backOff, asks), Math.max(0, backOff.untilMs - this.now()));
    this.timers.set(backOff.botId, timer);
  }

  private async due(backOff: BackOff, asks: number): Promise<void> {
    this.timers.delete(backOff.botId);
    try {
      if (backOff.seq !== undefined) {
        const pending = await this.history.pendingBackOffs(this.now());
        if (!pending.some((other) => other.botId === backOff.botId && other.seq === backOff.seq)) return;
      }
      // (A back-off's own stop ends a run after the crash too: its event's being the latest says enough.)
      if (backOff.seq === undefined && backOff.crashAtMs !== undefined && this.driver.engineRestarts !== undefined) {
        // A later run may have begun and crashed meanwhile (the engine restarted the first crash at once): its own record decides.
        const info = await this.driver.findBot(backOff.botId);
        if (info.running || (info.endedAt !== undefined && info.endedAt.getTime() > backOff.crashAtMs)) return;
      }
      // Looked at last, with no wait between it and the start: an operation asked during the reads above (a stop on a
      // busy host) is queued before this start would be, and this start would undo it.
      if ((this.asks.get(backOff.botId) ?? 0) !== asks || this.closed) return;
      await this.lifecycle.start(backOff.botId);
    } catch (err) {
      this.report(`bot ${backOff.botId} could not be started after its crash`, err);
    }
  }

  /** Hands the restarts of each held bot that runs, with no crash in its window and no wait ahead, back to the engine; starts one whose crash nothing answered. */
  private async sweep(): Promise<void> {
    if (this.sweeping || this.closed || this.driver.agentRestartedBots === undefined) return;
    this.sweeping = true;
    try {
      const stopped: string[] = [];
      for (const botId of (await this.driver.agentRestartedBots()).filter(this.inCare)) {
        if (this.closed) return;
        // A wait ahead, or a back-off's stop under way: not now.
        if (this.timers.has(botId) || this.inTurn.has(botId)) continue;
        try {
          const info = await this.driver.findBot(botId);
          if (!info.running) {
            stopped.push(botId);
            continue;
          }
          const windowMs = info.healthPolicy.restart?.windowMs ?? 0;
          // A run younger than the window: the crash before it may not be recorded yet (a busy host), and the
          // engine given its restarts back would restart the next crash at once, inside a back-off.
          if (windowMs > 0 && info.startedAt !== undefined && this.now() - info.startedAt.getTime() < windowMs) continue;
          if (windowMs > 0 && (await this.history.crashedSince(botId, this.now() - windowMs))) continue;
          await this.driver.engineRestarts?.(botId, true);
        } catch (err) {
          // Removed: the driver forgets it as it finds it gone.
          if (err instanceof NotFound) await this.driver.engineRestarts?.(botId, true).catch(() => undefined);
          else this.report(`bot ${botId}'s restarts could not be handed back to the engine`, err);
        }
      }
      // A crash nothing answered (its record was kept without the bot's policy, the runtime being slow to say it):
      // nobody else starts it. One read for them all.
      if (stopped.length > 0 && !this.closed) {
        for (const botId of await this.history.unansweredCrashes(stopped, this.now())) {
          if (!this.timers.has(botId)) this.schedule({ botId, untilMs: this.now(), seq: undefined });
        }
      }
    } catch (err) {
      this.report('the bots whose crashes the agent restarts could not be read', err);
    } finally {
      this.sweeping = false;
    }
  }
}
