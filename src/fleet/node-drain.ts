import { AgentError } from '../errors.js';
import type { BotSummary } from '../provisioning/bot-spec.js';
import { moveBot } from './bot-move.js';
import type { BotMoveDeps } from './bot-move.js';

/** What became of one bot of a drained node (docs/api.md §17). */
export interface DrainedBot {
  readonly bot_id: string;
  readonly outcome: 'moved' | 'stopped' | 'failed';
  /** Why it failed: the agent's own words, as its answer would have said them. */
  readonly msg?: string;
}

/**
 * Drains this node (docs/api.md §17): moves every bot it holds to `to`, or, without one, stops every bot
 * that runs; one bot at a time, each as its own call would. A bot that cannot be moved or stopped is said
 * so, and the others go on.
 */
export async function drainNode(deps: BotMoveDeps, bots: readonly BotSummary[], to: string | undefined): Promise<DrainedBot[]> {
  const drained: DrainedBot[] = [];
  for (const bot of bots) {
    try {
      if (to !== undefined) {
        await moveBot(deps, bot.bot_id, to);
        drained.push({ bot_id: bot.bot_id, outcome: 'moved' });
      } else {
        if (bot.state === 'running') await deps.lifecycle.stop(bot.bot_id);
        drained.push({ bot_id: bot.bot_id, outcome: 'stopped' });
      }
    } catch (err) {
      // An error of the agent's own says what it would answer; anything else is not for the caller's eyes.
      const msg = err instanceof AgentError ? err.message : 'internal error';
      if (!(err instanceof AgentError)) deps.report(`bot ${bot.bot_id} was not drained from node ${deps.node}`, err);
      drained.push({ bot_id: bot.bot_id, outcome: 'failed', msg });
    }
  }
  return drained;
}
