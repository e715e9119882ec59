import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandBounds, CommandResult } from '../runtime/command-output.js';
import type { FaultReporter } from '../runtime/driver.js';
import type { ActionSlots } from './action-slots.js';
import type { RetentionPolicy } from '../backups/retention.js';
import { backupHow } from '../backups/backups.js';
import type { BackupHow } from '../backups/backups.js';
import { COMMAND_OUTPUT_BYTES, COMMAND_TIMEOUT_DEFAULT_S } from './schedule-spec.js';
import type { ScheduleAction, ScheduleSpec } from './schedule-spec.js';
import type { ActionOutcome, RunState, StoredRun } from './schedule-store.js';

/** What a schedule's actions act on: the agent's own lifecycle, deploys and runtime (src/schedules/agent-actions.ts). */
export interface ScheduleActions {
  running(botId: string): Promise<boolean>;
  /** A restart, stop or start through the agent, as the platform's; answers what happened. */
  power(botId: string, operation: 'restart' | 'stop' | 'start'): Promise<string>;
  /** A deploy of `body`, once judged (docs/api.md §15): answers how it ended; throws when it failed. */
  deploy(botId: string, body: Readonly<Record<string, unknown>>): Promise<string>;
  /** A backup of the bot's data (docs/api.md §20): answers what was made; throws where backups are not made. */
  backup(botId: string, how: BackupHow, keep: RetentionPolicy | undefined, stores: readonly string[] | undefined): Promise<string>;
  /** Verifies the bot's newest backup (docs/api.md §20); throws when it fails. */
  verify(botId: string, store: string | undefined): Promise<string>;
  /** The command, in the bot's container; throws where the runtime cannot run one. */
  command(botId: string, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult>;
}

/** How a chain ended, as its run keeps it. */
export interface ChainEnd {
  readonly state: RunState;
  readonly reason: string | null;
  readonly actions: readonly ActionOutcome[];
}

export interface ChainParts {
  readonly actions: ScheduleActions;
  /** Aborted when the agent stops: the chain ends where it is (the run is marked cut by the scheduler). */
  readonly signal: AbortSignal;
  readonly now: () => number;
  /** Keeps the run's progress (and its lease); `end` ends it. False: the run is no longer this agent's. */
  keep(actions: readonly ActionOutcome[], end?: { state: RunState; reason: string | null; atMs: number }): Promise<boolean>;
  readonly renewEveryMs: number;
  readonly report: FaultReporter;
  /** The agent's bound on restarts, stops, starts and commands at once; a deploy or a backup, which may last minutes, takes none. */
  readonly slots?: ActionSlots;
}

/** The most of an action's error message a run keeps. */
const MESSAGE_MAX = 1_000;

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Runs the chain of a claimed run: each action after its offset, in order, its outcome kept as it ends; a
 * failed one ends the chain unless it says to go on. Undefined when the run stopped being this agent's
 * (another marked it cut) or the agent stops: then nothing more is done or kept.
 */
export async function runChain(spec: ScheduleSpec, run: StoredRun, parts: ChainParts): Promise<ChainEnd | undefined> {
  const outcomes: ActionOutcome[] = [...run.actions];
  let lost = false;
  const keep = async (end?: { state: RunState; reason: string | null; atMs: number }): Promise<void> => {
    const still = await parts.keep(outcomes, end).catch((err: unknown) => {
      // The database away a moment: the lease runs on, and the next renewal tries again.
      parts.report(`the progress of a run of bot ${run.botId} could not be kept`, err);
      return true;
    });
    if (!still) lost = true;
  };
  const renewal = setInterval(() => void keep(), parts.renewEveryMs);
  renewal.unref();
  let failure: string | null = null;
  try {
    for (const [index, action] of spec.actions.entries()) {
      if (action.offset_s > 0) await sleep(action.offset_s * 1000, undefined, { signal: parts.signal }).catch(() => undefined);
      if (parts.signal.aborted || lost) return undefined;
      // A first action with no offset is marked running by the claim that wrote the run (src/schedules/scheduler.ts).
      const marked = outcomes[index]?.outcome === 'running' ? outcomes[index].started_at : null;
      const startedAt = marked ?? iso(parts.now());
      if (marked === null) {
        outcomes[index] = { type: action.type, outcome: 'running', started_at: startedAt, ended_at: null, message: null };
        await keep();
        if (lost) return undefined;
      }
      const outcome = action.type === 'deploy' || action.type === 'backup' || action.type === 'verify' || !parts.slots ? await perform(action, run.botId, parts.actions) : await parts.slots.run(() => perform(action, run.botId, parts.actions));
      outcomes[index] = { type: action.type, started_at: startedAt, ended_at: iso(parts.now()), ...outcome };
      if (parts.signal.aborted) return undefined;
      if (outcome.outcome === 'failed') {
        failure ??= `action ${index + 1} (${action.type}) failed: ${outcome.message ?? 'no reason given'}`;
        if (!action.continue_on_failure) break;
      }
      // The last action's outcome is kept with the run's end, below.
      if (index === spec.actions.length - 1) break;
      await keep();
      if (lost) return undefined;
    }
  } finally {
    clearInterval(renewal);
  }
  const state: RunState = failure === null ? 'succeeded' : 'failed';
  await keep({ state, reason: failure, atMs: parts.now() });
  return lost ? undefined : { state, reason: failure, actions: outcomes };
}

type Performed = Pick<ActionOutcome, 'outcome' | 'message' | 'exit_code' | 'timed_out' | 'output' | 'output_truncated'> & { outcome: 'succeeded' | 'failed' };

async function perform(action: ScheduleAction, botId: string, actions: ScheduleActions): Promise<Performed> {
  try {
    switch (action.type) {
      case 'restart':
      case 'stop':
      case 'start':
        return { outcome: 'succeeded', message: await actions.power(botId, action.type) };
      case 'deploy':
        return { outcome: 'succeeded', message: await actions.deploy(botId, action.deploy!) };
      case 'backup':
        return { outcome: 'succeeded', message: await actions.backup(botId, backupHow(action.mode, action.pre, action.pre_timeout_s), action.keep, action.stores) };
      case 'verify':
        return { outcome: 'succeeded', message: await actions.verify(botId, action.store) };
      case 'command': {
        const result = await actions.command(botId, action.command!, { timeoutMs: (action.timeout_s ?? COMMAND_TIMEOUT_DEFAULT_S) * 1000, maxBytes: COMMAND_OUTPUT_BYTES });
        const ok = !result.timedOut && result.exitCode === 0;
        const said = result.message ?? (ok ? null : result.exitCode === null ? 'it ended with no exit code' : `it exited with code ${result.exitCode}`);
        return { outcome: ok ? 'succeeded' : 'failed', message: said, exit_code: result.exitCode, timed_out: result.timedOut, output: result.output, output_truncated: result.truncated };
      }
    }
  } catch (err) {
    return { outcome: 'failed', message: ((err as Error).message || String(err)).slice(0, MESSAGE_MAX) };
  }
}
