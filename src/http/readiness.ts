import { setTimeout as sleep } from 'node:timers/promises';
import { messages, RuntimeUnavailable, ShuttingDown } from '../errors.js';
import type { RuntimeDriver } from '../runtime/driver.js';

/** Within a grace, a ping that takes longer than this counts as the runtime not answering, so that `/readyz` answers in time. */
const PING_WITHIN_GRACE_MS = 1_000;

/**
 * What `/readyz` answers (docs/api.md §2, §5): not ready from a SIGTERM on, whatever the runtime says, and
 * otherwise ready while the runtime answers, or has not answered for less than the grace
 * (AGENT_READY_GRACE_MS) since it last did. An agent whose runtime has not answered since it started is not
 * ready: no Service sends it calls, and no rollout takes it for a replacement. A grace in the agent lets a probe take the pod out at its first failure: a
 * stopping agent is then out of its Service within a second or two, while the runtime may still blink.
 */
export class Readiness {
  private stopping = false;
  /** Whether the runtime has answered since the agent started: the grace is for a runtime that was there. */
  private answered = false;
  private failingSinceMs: number | undefined;
  /** The ping under way, which every check that comes meanwhile shares: a flood of `/readyz` is one ping at a time. */
  private pinging: Promise<void> | undefined;

  constructor(
    private readonly driver: Pick<RuntimeDriver, 'ping' | 'runtime'>,
    private readonly graceMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The agent stops: from now on it is not ready. */
  stop(): void {
    this.stopping = true;
  }

  /** Why the agent is ready; throws why it is not. */
  async check(): Promise<string> {
    if (this.stopping) throw new ShuttingDown(messages.shuttingDown);
    const reachable = `${this.driver.runtime} runtime reachable`;
    if (this.graceMs === 0) {
      await this.ping();
      return reachable;
    }
    try {
      await answeredWithin(this.ping(), this.driver.runtime, PING_WITHIN_GRACE_MS);
      this.answered = true;
      this.failingSinceMs = undefined;
      return reachable;
    } catch (err) {
      if (!this.answered) throw err;
      const now = this.now();
      this.failingSinceMs ??= now;
      const failingMs = now - this.failingSinceMs;
      if (failingMs >= this.graceMs) throw err;
      return `${this.driver.runtime} runtime not answering for ${(failingMs / 1000).toFixed(1)} s; ready for up to ${this.graceMs / 1000} s of that (AGENT_READY_GRACE_MS)`;
    }
  }

  private ping(): Promise<void> {
    this.pinging ??= this.driver.ping().finally(() => (this.pinging = undefined));
    return this.pinging;
  }
}

/** The runtime's `ping`, failed as unreachable once it took `ms` (the timer, unreferenced, holds nothing open). */
async function answeredWithin(ping: Promise<void>, runtime: string, ms: number): Promise<void> {
  const late = Symbol('late');
  if ((await Promise.race([ping, sleep(ms, late, { ref: false })])) === late) {
    throw new RuntimeUnavailable(messages.runtimeUnavailable(runtime));
  }
}
