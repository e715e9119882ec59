const ignore = (): void => {};

/** A task that waited its bound for its turn; it never ran. */
export class WaitedTooLong extends Error {
  constructor(
    /** The task that held it back, as it was labelled. */
    readonly running: string,
  ) {
    super(`waited too long behind ${running}`);
  }
}

/** Runs tasks one at a time per key, in the order they arrive. */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();
  /** The label of the task running for each key. */
  private readonly running = new Map<string, string>();

  /**
   * Runs `task` after every earlier task of `key` has settled. With
   * `maxWaitMs`, a task whose turn has not come by then is dropped: it
   * rejects with WaitedTooLong naming the task under way, and never runs.
   */
  run<T>(key: string, label: string, task: () => Promise<T>, maxWaitMs?: number): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const turn = maxWaitMs === undefined ? previous.then(() => true) : this.turnWithin(previous, maxWaitMs);
    const result = turn.then(async (ours) => {
      if (!ours) throw new WaitedTooLong(this.running.get(key) ?? 'another operation');
      this.running.set(key, label);
      try {
        return await task();
      } finally {
        this.running.delete(key);
      }
    });
    // A dropped task holds no place: the next one still waits for those before it.
    const tail = Promise.all([previous, result.then(ignore, ignore)]).then(ignore);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Resolves once every task queued so far has settled. */
  async drain(): Promise<void> {
    await Promise.all(this.tails.values());
  }

  /** True once `previous` settles, false if `ms` pass first. */
  private turnWithin(previous: Promise<void>, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      void previous.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
