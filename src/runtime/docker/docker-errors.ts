import { AgentError, messages, NotFound, OperationFailed, RuntimeUnavailable } from '../../errors.js';

/** The fields docker-modem puts on the errors it rejects with. */
interface EngineError {
  statusCode?: number;
  json?: { message?: string } | null;
  reason?: string;
  message?: string;
}

/** The engine's own words for a failed call, without docker-modem's prefix. */
export function engineDetail(err: unknown): string {
  const e = (err ?? {}) as EngineError;
  return (e.json?.message ?? e.reason ?? e.message ?? 'unknown error').trim();
}

/**
 * Turns what dockerode rejects with into an AgentError: no HTTP status means
 * the engine was never reached; 404 means no such container.
 * `failed` builds the error for any other engine refusal.
 */
export function translateDockerError(
  err: unknown,
  botId: string | undefined,
  failed: (detail: string) => AgentError = (detail) => new OperationFailed(detail),
): AgentError {
  if (err instanceof AgentError) return err;
  const status = (err as EngineError | undefined)?.statusCode;
  if (typeof status !== 'number') return new RuntimeUnavailable(messages.runtimeUnavailable('docker'), { cause: err });
  if (status === 404 && botId !== undefined) return new NotFound(messages.botNotFound(botId));
  return failed(engineDetail(err));
}
