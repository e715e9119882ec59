import type { Logger } from 'pino';
import { AgentError } from '../errors.js';
import { callerLabel } from './caller.js';
import type { Caller } from './caller.js';
import { failureFields } from './request-log.js';
import type { AgentMetrics } from './metrics.js';

/** Who asked for a lifecycle operation, for the audit line. */
export interface AuditContext {
  readonly requestId: string | undefined;
  readonly caller: Caller | undefined;
}

/** Who asked, as the request's context recorded it. */
export function askerOf(ctx: { state: { requestId?: string; caller?: Caller } }): AuditContext {
  return { requestId: ctx.state.requestId, caller: ctx.state.caller };
}

/**
 * Runs `act` and writes its audit line. `afterAnswer`: the request was answered
 * before the operation ran, so this line is the only one to say why it failed.
 */
export type Audit = <T>(who: AuditContext, operation: string, botId: string, act: () => Promise<T>, afterAnswer?: boolean) => Promise<T>;

/** Told of each operation that ended: what, on which bot, its result (`ok`, `failed 504`), and who asked. */
export type OperationEnded = (operation: string, botId: string, result: string, by: 'bot' | 'platform') => void;

/**
 * Runs a lifecycle operation and writes one audit line for it (who, what,
 * which bot, result, duration), counting it in the metrics. `onBegun` hears
 * of each before it runs (or waits its turn).
 */
export function auditor(logger: Logger, metrics: AgentMetrics, onEnded: OperationEnded = () => {}, onBegun: (operation: string, botId: string) => void = () => {}): Audit {
  return async (who, operation, botId, act, afterAnswer = false) => {
    const started = performance.now();
    onBegun(operation, botId);
    const record = (result: string, failure?: Record<string, unknown>): void => {
      metrics.lifecycle.inc({ operation, result });
      onEnded(operation, botId, result, who.caller?.kind === 'bot' ? 'bot' : 'platform');
      logger[failure ? 'error' : 'info'](
        { audit: true, requestId: who.requestId, caller: callerLabel(who.caller), operation, botId, result, ms: Math.round(performance.now() - started), ...failure },
        `${operation} ${botId}: ${result}`,
      );
    };
    try {
      const value = await act();
      record('ok');
      return value;
    } catch (err) {
      const status = err instanceof AgentError ? err.status : 500;
      record(`failed ${status}`, afterAnswer && status >= 500 ? failureFields(err) : undefined);
      throw err;
    }
  };
}
