import { randomBytes } from 'node:crypto';
import type { SqlPort } from '../history/sql-port.js';

/** What an alert watches (docs/api.md §22). */
export type AlertKind = 'line' | 'cpu' | 'memory' | 'silence';

/** A rule as the platform made it: the fields its kind takes, and a cooldown between two alerts of one bot. */
export interface AlertSpec {
  readonly name: string;
  /** The one bot it watches; undefined: every bot. */
  readonly botId?: string | undefined;
  readonly kind: AlertKind;
  /** `line`: a substring, an RE2 regular expression (both: both must match), and a stream. */
  readonly q?: string | undefined;
  readonly regex?: string | undefined;
  readonly stream?: 'stdout' | 'stderr' | undefined;
  /** `cpu`, `memory`: above this percent (of a core; of the bot's memory limit) for all of `windowS`. */
  readonly abovePercent?: number | undefined;
  readonly windowS?: number | undefined;
  /** `silence`: no line for this long while the bot runs. */
  readonly silentS?: number | undefined;
  readonly cooldownS: number;
}

export interface StoredAlert extends AlertSpec {
  readonly id: string;
  readonly createdMs: number;
}

/** A rule's id: `alr_` and 16 hex digits. */
export const ALERT_ID = /^alr_[0-9a-f]{16}$/;

const ruleOf = (row: Record<string, unknown>): StoredAlert => ({
  ...(JSON.parse(String(row.spec)) as AlertSpec),
  id: String(row.id),
  createdMs: Number(row.created_ms),
});

/** The alert rules in the agent's database (SQLite, or PostgreSQL shared by several agents). */
export class AlertStore {
  constructor(private readonly sql: SqlPort) {}

  async add(spec: AlertSpec, nowMs: number): Promise<StoredAlert> {
    const id = `alr_${randomBytes(8).toString('hex')}`;
    await this.sql.query('INSERT INTO alert_rules (id, bot_id, spec, created_ms) VALUES ($1, $2, $3, $4)', [id, spec.botId ?? null, JSON.stringify(spec), nowMs]);
    return { ...spec, id, createdMs: nowMs };
  }

  async all(): Promise<StoredAlert[]> {
    return (await this.sql.query('SELECT id, spec, created_ms FROM alert_rules ORDER BY created_ms, id')).map(ruleOf);
  }

  async get(id: string): Promise<StoredAlert | undefined> {
    const [row] = await this.sql.query('SELECT id, spec, created_ms FROM alert_rules WHERE id = $1', [id]);
    return row && ruleOf(row);
  }

  /** Whether there was such a rule. */
  async remove(id: string): Promise<boolean> {
    return this.sql.transaction(async (query) => {
      const found = (await query('SELECT id FROM alert_rules WHERE id = $1', [id])).length > 0;
      await query('DELETE FROM alert_rules WHERE id = $1', [id]);
      await query('DELETE FROM alerts_fired WHERE rule_id = $1', [id]);
      return found;
    });
  }

  /** Takes the rule's turn to fire for the bot: true only when it last fired a cooldown ago or more (or never). */
  async claim(ruleId: string, botId: string, nowMs: number, cooldownMs: number): Promise<boolean> {
    const rows = await this.sql.query(
      'INSERT INTO alerts_fired (rule_id, bot_id, fired_ms) VALUES ($1, $2, $3) ON CONFLICT (rule_id, bot_id) DO UPDATE SET fired_ms = $3 WHERE alerts_fired.fired_ms <= $4 RETURNING fired_ms',
      [ruleId, botId, nowMs, nowMs - cooldownMs],
    );
    return rows.length > 0;
  }
}
