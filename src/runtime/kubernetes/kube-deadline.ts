import type { ObservableMiddleware, setHeaderOptions } from '@kubernetes/client-node';
import { of } from '@kubernetes/client-node/dist/gen/rxjsStub.js';

/** How long one API server call may take before the API server counts as unreachable. */
const CALL_DEADLINE_MS = 1_500;

export type CallOptions = ReturnType<typeof setHeaderOptions>;

/** Per-call options that abort the request past the deadline (client-node's middleware, as setHeaderOptions builds it). */
export function withDeadline(options: CallOptions = {}, deadlineMs = CALL_DEADLINE_MS): CallOptions {
  const deadline: ObservableMiddleware = {
    pre: (context) => {
      context.setSignal(AbortSignal.timeout(deadlineMs));
      return of(context);
    },
    post: (response) => of(response),
  };
  return { ...options, middleware: [...(options.middleware ?? []), deadline], middlewareMergeStrategy: 'append' };
}

