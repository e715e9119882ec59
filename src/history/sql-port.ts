export type Rows = Record<string, unknown>[];
/** One statement with `$1`, `$2` ... placeholders, and the rows it answers. */
export type SqlQuery = (text: string, values?: readonly unknown[]) => Promise<Rows>;

/** What the schedules need of the agent's database (SQLite or PostgreSQL): statements, and transactions of them. */
export interface SqlPort {
  readonly query: SqlQuery;
  /** Runs `work` in one transaction: all of its writes are kept, or none. */
  transaction<T>(work: (query: SqlQuery) => Promise<T>): Promise<T>;
}
