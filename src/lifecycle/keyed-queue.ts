const ignore = (): void => {};

/** Runs tasks one at a time per key, in the order they arrive. */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `task` after every earlier task of `key` has settled. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.then(ignore, ignore);
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
}
