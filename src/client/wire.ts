// The agent's answers as they travel (docs/api.md): shared by the bot's client and the operator's console.

/** What the agent's stats answer holds. */
export interface BotStats {
  cpu_percent: number;
  memory_usage: string;
  memory_percent: number;
  uptime: string;
}

/** How a run of the bot ended (docs/api.md §8). */
export interface ExitRecord {
  at: string;
  exit_code: number | null;
  signal: string | null;
  oom_killed: boolean;
  requested: boolean;
  started_at: string | null;
  logs: string;
}

/** What the agent knows of the bot now (docs/api.md §8). */
export interface BotStatus {
  bot_id: string;
  user_id: string | null;
  state: 'running' | 'stopped' | 'exited' | 'crash-looping';
  started_at: string | null;
  uptime: string | null;
  crashes_last_hour: number;
  last_exit: ExitRecord | null;
}

/** One event (docs/api.md §9); `exited` carries `exit`, `operation` its `operation`, `result` and `by`. */
export interface BotEvent {
  id: string;
  type: 'started' | 'exited' | 'crash-looping' | 'recovered' | 'operation';
  bot_id: string;
  at: string;
  [field: string]: unknown;
}
