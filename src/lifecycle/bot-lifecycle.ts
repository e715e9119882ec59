import { messages, RestartTimeout } from '../errors.js';
import type { PowerOutcome, RuntimeDriver } from '../runtime/driver.js';
import { KeyedQueue } from './keyed-queue.js';

/**
 * Restart, stop and start of bots, serialised per bot above any driver.
 * Concurrent restarts of one bot coalesce into one.
 */
export class BotLifecycle {
  private readonly queue = new KeyedQueue();
  private readonly restarts = new Map<string, Promise<void>>();

  constructor(
    private readonly driver: RuntimeDriver,
    private readonly restartTimeoutMs: number,
  ) {}

  /**
   * Restarts the bot, or joins the restart already under way, and runs it
   * to its end whoever waits for it. Settles with the restart's result.
   */
  restartInFull(botId: string): Promise<void> {
    let restarting = this.restarts.get(botId);
    if (!restarting) {
      restarting = this.queue
        .run(botId, () => this.driver.restart(botId))
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
    return this.queue.run(botId, () => this.driver.stop(botId));
  }

  /** Starts the bot after the operations queued before it. */
  start(botId: string): Promise<PowerOutcome> {
    return this.queue.run(botId, () => this.driver.start(botId));
  }

  /** Resolves once every operation started so far has ended. */
  drain(): Promise<void> {
    return this.queue.drain();
  }
}
