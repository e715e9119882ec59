import { messages, OperationInProgress, RestartTimeout } from '../errors.js';
import type { PowerOutcome, RuntimeDriver } from '../runtime/driver.js';
import { localLocks } from '../runtime/bot-locks.js';
import type { BotLocks, Inherited } from '../runtime/bot-locks.js';
import { LocalDeployMarks } from './deploy-marks.js';
import type { DeployMarks } from './deploy-marks.js';
import { KeyedQueue, WaitedTooLong } from './keyed-queue.js';

/**
 * Restart, stop and start of bots, serialised per bot above any driver (and,
 * through `locks`, across agents). Concurrent restarts of one bot coalesce into one. No caller waits without
 * bound: a restart's time in the queue counts against its time-out, and a
 * stop or start that waited the restart time-out behind another operation is
 * dropped with OperationInProgress.
 */
export class BotLifecycle {
  private readonly queue = new KeyedQueue();
  private readonly restarts = new Map<string, Promise<void>>();

  constructor(
    private readonly driver: RuntimeDriver,
    private readonly restartTimeoutMs: number,
    private readonly locks: BotLocks = localLocks,
    /** Bots under a deploy: they take no lifecycle operation meanwhile (docs/api.md §15). */
    private readonly deploys: DeployMarks = new LocalDeployMarks(),
  ) {}

  /** Refuses an operation on a bot under a deploy. */
  private notDeploying(botId: string): void {
    if (this.deploys.isHeld(botId)) throw new OperationInProgress(messages.deployInProgress(botId));
  }

  /** Resolves once the operations on the bot queued so far have ended (a deploy begins after them). */
  async whenIdle(botId: string): Promise<void> {
    await this.queue.run(botId, 'deploy', async () => undefined);
  }

  /**
   * Restarts the bot, or joins the restart already under way, and runs it
   * to its end whoever waits for it. Settles with the restart's result.
   */
  restartInFull(botId: string): Promise<void> {
    try {
      this.notDeploying(botId);
    } catch (err) {
      return Promise.reject(err);
    }
    let restarting = this.restarts.get(botId);
    if (!restarting) {
      restarting = this.queue
        .run(botId, 'restart', () =>
          this.locks.hold(
            botId,
            'restart',
            // A restart left by an agent that died mid-way is finished, not begun again; one older than a restart may take is done again.
            (inherited) => this.driver.restart(botId, this.unfinishedRestart(inherited)),
            { joined: () => undefined, waitMs: this.restartTimeoutMs },
          ),
        )
        .finally(() => this.restarts.delete(botId));
      this.restarts.set(botId, restarting);
    }
    return restarting;
  }

  /**
   * Like restartInFull, but gives up waiting after the restart time-out with
   * RestartTimeout; the restart itself goes on.
   */
  async restart(botId: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new RestartTimeout(messages.restartTimeout(botId, this.restartTimeoutMs))),
        this.restartTimeoutMs,
      );
    });
    try {
      await Promise.race([this.restartInFull(botId), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops the bot after the operations queued before it. */
  stop(botId: string): Promise<PowerOutcome> {
    return this.power(botId, 'stop', () => this.driver.stop(botId));
  }

  /** Starts the bot after the operations queued before it. */
  start(botId: string): Promise<PowerOutcome> {
    return this.power(botId, 'start', () => this.driver.start(botId));
  }

  private async power(botId: string, operation: string, act: () => Promise<PowerOutcome>): Promise<PowerOutcome> {
    this.notDeploying(botId);
    try {
      return await this.queue.run(botId, operation, () => this.locks.hold(botId, operation, act, { waitMs: this.restartTimeoutMs }), this.restartTimeoutMs);
    } catch (err) {
      if (err instanceof WaitedTooLong) throw new OperationInProgress(messages.inProgress(err.running, botId, this.restartTimeoutMs));
      throw err;
    }
  }

  /** When the restart a dead agent left began, if it is one to finish: begun within the restart time-out. */
  private unfinishedRestart(inherited: Inherited | undefined): Date | undefined {
    if (inherited?.operation !== 'restart') return undefined;
    return Date.now() - inherited.begun.getTime() < this.restartTimeoutMs ? inherited.begun : undefined;
  }

  /** Resolves once every operation started so far has ended. */
  drain(): Promise<void> {
    return this.queue.drain();
  }
}
