import type { BotHealthSpec } from './bot-spec.js';
import type { PullReport } from './provisioner.js';
import type { RegistryLogin } from './registry-credentials.js';

/** What an update changes of a bot (docs/api.md §15); what it leaves out stays as it is. */
export interface BotChange {
  readonly image?: string | undefined;
  /** Variables set (added or replaced); the platform's own cannot be. */
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly command?: readonly string[] | undefined;
  readonly memoryLimitBytes?: number | undefined;
  readonly cpuLimit?: number | undefined;
  readonly health?: BotHealthSpec | undefined;
  readonly registryLogin?: RegistryLogin | undefined;
}

/** What a revision runs, as its record shows it: the names of its extra variables, never their values. */
export interface RevisionSpec {
  readonly image: string;
  readonly command: readonly string[] | null;
  readonly env: readonly string[];
  readonly memory_limit: number | null;
  readonly cpu_limit: number | null;
  readonly health: { readonly exec: readonly string[] } | null;
}

/** The run a deploy made, as the deploy follows it. */
export interface CandidateState {
  /** False once its container is gone. */
  readonly exists: boolean;
  readonly running: boolean;
  /** When its current run began (ms); undefined before it ever ran. */
  readonly startedAtMs: number | undefined;
  /** How often the runtime restarted it since it was made. */
  readonly restarts: number;
  readonly health: 'healthy' | 'unhealthy' | 'starting' | 'none';
  readonly exitCode: number | null;
}

/** A deploy or rollback a dead agent left, as the runtime shows it. */
export interface LeftDeploy {
  readonly botId: string;
  /** The revision that ran before, kept to go back to. */
  readonly from: number;
  /** The revision it was going to; undefined when its run was never made. */
  readonly to: number | undefined;
  /** When the deploy was to be judged by (ms); undefined for a rollback or a run never made. */
  readonly deadlineAtMs: number | undefined;
}

/**
 * A runtime's revisions of bots (docs/api.md §15): one run of a bot at a time, the previous one kept,
 * stopped, to go back to. Every step leaves exactly one run, or a state `leftDeploys` finds and
 * `settle` ends with one.
 */
export interface RevisionRuntime {
  /** The revision the bot runs now and what it runs. Throws NotFound. */
  current(botId: string): Promise<{ readonly revision: number; readonly spec: RevisionSpec }>;
  /** Whether the bot has a previous revision kept to roll back to, and its number. */
  previous(botId: string): Promise<number | undefined>;
  /**
   * What may fail before anything of the bot changes, done before a revision number is taken (Docker pulls the
   * change's image when the engine lacks it): a deploy refused here is no revision (docs/api.md §15).
   */
  prepare?(botId: string, change: BotChange, pulls?: PullReport): Promise<void>;
  /**
   * Puts `change` in place as `revision`: pulls its image when missing, stops the run, starts the new one,
   * keeping the old one stopped. Throws OperationInProgress while another deploy holds the bot.
   */
  switchTo(botId: string, revision: number, change: BotChange, deadlineAtMs: number, pulls?: PullReport): Promise<RevisionSpec>;
  /** The new run, while the deploy judges it; with no deploy under way, the run the bot has (a new bot's first). */
  candidate(botId: string): Promise<CandidateState>;
  /** The new run's last lines (at most `lines`). */
  lastLines(botId: string, lines: number): Promise<string>;
  /** The deploy succeeded: the old run becomes the previous revision (the one before that goes). */
  keep(botId: string): Promise<void>;
  /** The deploy failed: the new run goes, the old one runs again. */
  undo(botId: string): Promise<void>;
  /** Back to the previous revision; the current one becomes the previous. Throws NotFound without one. */
  rollBack(botId: string): Promise<{ readonly from: number; readonly to: number }>;
  /** Deploys and rollbacks under way or left by a dead agent. */
  leftDeploys(): Promise<LeftDeploy[]>;
  /** Ends what a dead agent left: a deploy undone, a rollback finished; one run either way. */
  settle(left: LeftDeploy): Promise<void>;
}
