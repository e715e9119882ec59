/** Error codes of a runtime that cannot be reached: refused, reset, gone, too slow, no route, no name. */
const TRANSPORT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ENOENT', // a unix socket that is not there
  'EACCES', // a unix socket the agent may not open
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ABORT_ERR', // a deadline's AbortSignal
  'ERR_STREAM_PREMATURE_CLOSE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  // TLS: a certificate the agent does not trust, or a handshake that failed.
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
]);
/** Names of the errors a deadline or an abort raises. */
const ABORT_NAMES = new Set(['AbortError', 'TimeoutError']);

interface Failure {
  code?: unknown;
  name?: unknown;
  cause?: unknown;
}

/**
 * Whether `err` (or an error it was caused by) says the runtime could not be
 * reached, as opposed to the runtime refusing a call or a bug in the agent.
 */
export function isTransportFailure(err: unknown): boolean {
  let failure = err;
  for (let depth = 0; depth < 5 && typeof failure === 'object' && failure !== null; depth += 1) {
    const { code, name, cause } = failure as Failure;
    if (typeof code === 'string' && (TRANSPORT_CODES.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_'))) return true;
    if (typeof name === 'string' && ABORT_NAMES.has(name)) return true;
    failure = cause;
  }
  return false;
}
