import { ApiException } from '@kubernetes/client-node';
import { AgentError, messages, NotFound, OperationFailed, RuntimeUnavailable } from '../../errors.js';
import { isTransportFailure } from '../transport-failure.js';

/** The `Status` object the API server answers failures with; client-node may hand it over as text. */
function statusMessage(body: unknown): string | undefined {
  let status = body;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body);
    } catch {
      return body.trim() || undefined;
    }
  }
  const message = (status as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : undefined;
}

/** The HTTP status the API server refused a call with; undefined when it did not answer. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/**
 * Turns what client-node rejects with into an AgentError: a failure to reach
 * the API server, or a 5xx from it, is RuntimeUnavailable; 404 means no such
 * bot; 403 names the permission the agent's service account lacks. Anything
 * else is a bug, handed back as it is, so that it is answered 500 and its
 * stack logged.
 */
export function translateKubeError(
  err: unknown,
  botId: string | undefined,
  failed: (detail: string) => AgentError = (detail) => new OperationFailed(`Kubernetes API error: ${detail}`),
): Error {
  if (err instanceof AgentError) return err;
  if (!(err instanceof ApiException)) {
    if (isTransportFailure(err)) return new RuntimeUnavailable(messages.runtimeUnavailable('kubernetes'), { cause: err });
    return err instanceof Error ? err : new Error(String(err));
  }
  const detail = statusMessage(err.body) ?? `HTTP ${err.code}`;
  if (err.code === 404 && botId !== undefined) return new NotFound(messages.botNotFound(botId));
  if (err.code === 403) return new OperationFailed(`the agent's service account lacks a permission: ${detail}`);
  if (err.code >= 500) return new RuntimeUnavailable(`${messages.runtimeUnavailable('kubernetes')}: ${detail}`, { cause: err });
  return failed(detail);
}
