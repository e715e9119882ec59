import { AgentError, EngineBusy, messages, NotFound, OperationFailed, RuntimeUnavailable } from '../../errors.js';
import { isTransportFailure } from '../transport-failure.js';

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

/** The HTTP status the engine refused a call with; undefined when the engine did not answer. */
export function engineStatus(err: unknown): number | undefined {
  const status = (err as EngineError | undefined)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/**
 * Turns what dockerode rejects with into an AgentError: a failure to reach
 * the engine is RuntimeUnavailable (the original as its cause); 404 means no
 * such container; `failed` builds the error for any other refusal. Anything
 * else is a bug, handed back as it is, so that it is answered 500 and its
 * stack logged.
 */
export function translateDockerError(
  err: unknown,
  botId: string | undefined,
  failed: (detail: string) => AgentError = (detail) => new OperationFailed(detail),
): Error {
  if (err instanceof AgentError) return err;
  const status = engineStatus(err);
  if (status === undefined) {
    if (isTransportFailure(err)) return new RuntimeUnavailable(messages.runtimeUnavailable('docker'), { cause: err });
    return err instanceof Error ? err : new Error(String(err));
  }
  if (status === 404 && botId !== undefined) return new NotFound(messages.botNotFound(botId));
  // The engine's 409: the container is being removed, renamed or changed (a deploy's switch); a moment later it is not.
  if (status === 409) return new EngineBusy(`${botId === undefined ? 'the container' : `bot ${botId}`} is busy in the engine, retry shortly: ${engineDetail(err)}`);
  return failed(engineDetail(err));
}
