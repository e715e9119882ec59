import type { Logger } from 'pino';
import { AgentError } from '../errors.js';
import type { AgentMetrics } from './metrics.js';

/** Who asked for a lifecycle operation, for the audit line. */
export interface AuditContext {
  readonly requestId: string | undefined;
  readonly caller: string | undefined;
}

/** Who asked, as the request's context recorded it. */
export function askerOf(ctx: { state: { requestId?: string; caller?: string } }): AuditContext {
  return { requestId: ctx.state.requestId, caller: ctx.state.caller };
}

export type Audit = <T>(who: AuditContext, operation: string, botId: string, act: () => Promise<T>) => Promise<T>;

/**
 * Runs a lifecycle operation and writes one audit line for it (who, what,
 * which bot, result, duration), counting it in the metrics.
 */
export function auditor(logger: Logger, metrics: AgentMetrics): Audit {
  return async (who, operation, botId, act) => {
    const started = performance.now();
    const record = (result: string): void => {
      metrics.lifecycle.inc({ operation, result });
      logger.info(
        { audit: true, ...who, operation, botId, result, ms: Math.round(performance.now() - started) },
        `${operation} ${botId}: ${result}`,
      );
    };
    try {
      const value = await act();
      record('ok');
      return value;
    } catch (err) {
      record(err instanceof AgentError ? `failed ${err.status}` : 'failed');
      throw err;
    }
  };
}
