/**
 * At most `size` of an agent's scheduled actions at once; the others wait their turn, first come first
 * served (docs/api.md §18). A fleet whose schedules fall due in one minute would otherwise ask the runtime
 * for hundreds of commands in one moment, and the calls queued behind the engine's connections would
 * time out there as if the engine were away.
 */
export class ActionSlots {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(size: number) {
    this.free = size;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The slot passes straight to the next in line, or is freed.
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}
