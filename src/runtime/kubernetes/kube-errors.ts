import { ApiException } from '@kubernetes/client-node';
import { AgentError, messages, NotFound, OperationFailed, RuntimeUnavailable } from '../../errors.js';

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

/**
 * Turns what client-node rejects with into an AgentError: no HTTP answer or a
 * 5xx means the API server is unreachable; 404 means no such bot; 403 names
 * the permission the agent's service account lacks.
 */
export function translateKubeError(
  err: unknown,
  botId: string | undefined,
  failed: (detail: string) => AgentError = (detail) => new OperationFailed(`Kubernetes API error: ${detail}`),
): AgentError {
  if (err instanceof AgentError) return err;
  if (!(err instanceof ApiException)) return new RuntimeUnavailable(messages.runtimeUnavailable('kubernetes'), { cause: err });
  const detail = statusMessage(err.body) ?? `HTTP ${err.code}`;
  if (err.code === 404 && botId !== undefined) return new NotFound(messages.botNotFound(botId));
  if (err.code === 403) return new OperationFailed(`the agent's service account lacks a permission: ${detail}`);
  if (err.code >= 500) return new RuntimeUnavailable(`${messages.runtimeUnavailable('kubernetes')}: ${detail}`);
  return failed(detail);
}
