import type { Config } from '../config.js';
import type { SharedStateStore, SharedWindow } from '../shared/shared-state.js';
import type { SharedBeats } from '../shared/shared-state.js';
import type { HistoryStore } from './history-store.js';
import { postgresBeats } from './postgres-beats.js';
import { PostgresDatabase } from './postgres-database.js';
import { postgresOperationWindow } from './postgres-operation-window.js';
import { PostgresHistoryStore } from './postgres-store.js';
import { SqliteHistoryStore } from './sqlite-store.js';

/** An agent's database: its history, and what it shares with other agents beside it. */
export type AgentStore = HistoryStore & SharedStateStore;

/** The history's store, and where a store shared by several agents counts lifecycle operations. */
export interface OpenedStore {
  readonly store: AgentStore;
  /** Undefined for one agent's own store: its rate limiter counts in memory. */
  readonly sharedWindow: SharedWindow | undefined;
  /** Undefined for one agent's own store: it takes every heartbeat itself. */
  readonly sharedBeats: SharedBeats | undefined;
}

/**
 * The database the configuration names: PostgreSQL when AGENT_DATABASE_URL is
 * set (several agents share it), else SQLite under AGENT_DATA_DIR. Throws when
 * the SQLite file cannot be opened; a PostgreSQL server that cannot be reached
 * makes `store.opened()` reject.
 */
export function openStore(config: Pick<Config, 'dataDir' | 'databaseUrl'>, report: (what: string, err: unknown) => void): OpenedStore {
  if (config.databaseUrl === undefined) return { store: new SqliteHistoryStore(config.dataDir), sharedWindow: undefined, sharedBeats: undefined };
  const database = new PostgresDatabase(config.databaseUrl, report);
  return { store: new PostgresHistoryStore(database, report), sharedWindow: postgresOperationWindow(database), sharedBeats: postgresBeats(database) };
}
