import { messages, OperationInProgress } from '../errors.js';

/** The marks lifecycle operations consult: a bot under a deploy takes none (docs/api.md §15). */
export interface DeployMarks {
  /** Holds the bot for the deploy's whole length; throws OperationInProgress while it is held. */
  hold(botId: string): () => void;
  isHeld(botId: string): boolean;
}

/** Bots under a deploy of this agent's. */
export class LocalDeployMarks implements DeployMarks {
  private readonly held = new Set<string>();

  hold(botId: string): () => void {
    if (this.held.has(botId)) throw new OperationInProgress(messages.deployInProgress(botId));
    this.held.add(botId);
    return () => this.held.delete(botId);
  }

  isHeld(botId: string): boolean {
    return this.held.has(botId);
  }
}
