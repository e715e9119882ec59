import type Docker from 'dockerode';

/** A stream dockerode hands back, which can be ended from our side. */
export type EngineStream = NodeJS.ReadableStream & { destroy?: () => void };

/**
 * dockerode's ping and getEvents take an abortSignal like its other calls;
 * its types leave the option out. The one place that says so.
 */
export interface SignalledDocker {
  ping(options: { abortSignal: AbortSignal }): Promise<unknown>;
  getEvents(options: { filters: Record<string, string[]>; since?: string | undefined; abortSignal: AbortSignal }): Promise<EngineStream>;
}

export const signalled = (docker: Docker): SignalledDocker => docker as unknown as SignalledDocker;
