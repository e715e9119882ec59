// The agent's answers as they travel (docs/api.md): shared by the bot's client and the operator's console.

/** What the agent's stats answer holds. */
export interface BotStats {
  cpu_percent: number;
  memory_usage: string;
  memory_percent: number;
  uptime: string;
  /** memory_usage in bytes. */
  memory_bytes: number;
  /** What memory_percent is taken against, in bytes: the bot's memory limit, else the host's memory. */
  memory_limit_bytes: number;
  /** uptime in whole seconds. */
  uptime_s: number;
  /** The run's I/O since it started, in bytes; null where the runtime does not tell it (Kubernetes). */
  network_rx_bytes: number | null;
  network_tx_bytes: number | null;
  block_read_bytes: number | null;
  block_write_bytes: number | null;
}

/** How a run of the bot ended (docs/api.md §8). */
export interface ExitRecord {
  at: string;
  exit_code: number | null;
  signal: string | null;
  oom_killed: boolean;
  requested: boolean;
  started_at: string | null;
  /** Set when the watchdog (or the kubelet's liveness probe) ended the run for its health (docs/api.md §13). */
  unhealthy: UnhealthyEnd | null;
  logs: string;
}

/** Why a run was ended for its health. */
export interface UnhealthyEnd {
  check: 'exec' | 'heartbeat';
  output: string | null;
}

/** The bot's health (docs/api.md §13): its runtime's check, or its heartbeats. */
export interface Health {
  status: 'healthy' | 'unhealthy' | 'starting' | 'none';
  check: 'exec' | 'heartbeat' | null;
  since: string | null;
  output: string | null;
}

/** What the agent knows of the bot now (docs/api.md §8). */
export interface BotStatus {
  bot_id: string;
  user_id: string | null;
  state: 'running' | 'stopped' | 'exited' | 'crash-looping' | 'given-up';
  started_at: string | null;
  uptime: string | null;
  crashes_last_hour: number;
  last_exit: ExitRecord | null;
  health: Health;
  /** The node whose runtime holds the bot (docs/api.md §17). */
  node: string;
  /** Its data folders (docs/api.md §19), with what each used when last measured. */
  data: DataFolderUse[];
}

/** One data folder of a bot: what it may hold, and what it used when last measured (null before a measure). */
export interface DataFolderUse {
  path: string;
  size_mb: number | null;
  used_bytes: number | null;
  measured_at: string | null;
}

/** One event (docs/api.md §9); `exited` carries `exit`, `operation` its `operation`, `result` and `by`, `unhealthy` and `restarted` their `check` and `output`. */
export interface BotEvent {
  id: string;
  type:
    | 'started'
    | 'exited'
    | 'crash-looping'
    | 'recovered'
    | 'operation'
    | 'unhealthy'
    | 'restarted'
    | 'pulling'
    | 'pulled'
    | 'pull-failed'
    | 'deploy-started'
    | 'deploy-succeeded'
    | 'deploy-failed'
    | 'rolled-back'
    | 'given-up'
    | 'backing-off';
  bot_id: string;
  at: string;
  [field: string]: unknown;
}

/** One revision of the bot (docs/api.md §15): what it ran, who made it, when, and how it ended. */
export interface Revision {
  revision: number;
  spec: { image?: string; command?: string[] | null; env?: string[]; memory_limit?: number | null; cpu_limit?: number | null; health?: { exec: string[] } | null };
  by: string;
  at: string;
  outcome: 'deploying' | 'succeeded' | 'failed' | 'rolled-back' | 'interrupted';
  reason: string | null;
  ended_at: string | null;
}

/** What a deploy changes, and how its new run is judged (docs/api.md §15); what it leaves out stays. */
export interface DeployChange {
  image?: string;
  env?: Record<string, string>;
  command?: string[];
  memory_limit?: number;
  cpu_limit?: number;
  min_ready_s?: number;
  deadline_s?: number;
  rollback?: boolean;
  registry_auth?: { username: string; password: string };
}

/** A backup of a bot's data (docs/api.md §20). */
export interface Backup {
  id: string;
  bot_id: string;
  created_at: string;
  mode: 'stop' | 'live' | 'pre';
  downtime_ms: number | null;
  /** Mode `pre`: what its command did in the bot before the copy. */
  pre?: { command: string[]; exit_code: number | null; output: string; output_truncated: boolean };
  size_bytes: number;
  locked: boolean;
  verification: { at: string; ok: boolean; message?: string } | null;
  copies: { store: string; at: string; ok: boolean; message?: string }[];
  folders: { path: string; file: string; size_bytes: number; sha256: string }[];
}
