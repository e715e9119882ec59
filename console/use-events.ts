import { useEffect, useRef } from 'preact/hooks';
import { BOT_EVENT_TYPES } from '../src/history/event-types.js';
import type { BotEvent } from './api.js';

/** The stream's address, resuming after `cursor` when there is one. */
function resumed(url: string, cursor: string | undefined): string {
  if (cursor === undefined) return url;
  const address = new URL(url, location.href);
  address.searchParams.set('after', cursor);
  return `${address.pathname}${address.search}`;
}

/**
 * Follows an events stream (docs/api.md §9) while the component is shown. The
 * browser's EventSource reconnects by itself after a dropped connection and
 * sends the last cursor it saw as Last-Event-ID; after an answer that is not
 * the stream (the agent restarting, a 429), which ends an EventSource for
 * good, the stream is opened again after that cursor. Either way the agent
 * resumes where it broke off: nothing is missed and nothing comes twice.
 */
export function useEvents(url: string | undefined, onEvent: (event: BotEvent) => void): void {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => {
    if (url === undefined) return;
    let cursor: string | undefined;
    let source: EventSource | undefined;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const take = (message: MessageEvent<string>) => {
      if (message.lastEventId) cursor = message.lastEventId;
      try {
        handler.current(JSON.parse(message.data) as BotEvent);
      } catch {
        // Not an event of ours: left out.
      }
    };
    const open = () => {
      source = new EventSource(resumed(url, cursor), { withCredentials: true });
      for (const type of BOT_EVENT_TYPES) source.addEventListener(type, take);
      source.onerror = () => {
        if (source?.readyState !== EventSource.CLOSED) return;
        retry = setTimeout(open, 3_000);
      };
    };
    open();
    return () => {
      source?.close();
      clearTimeout(retry);
    };
  }, [url]);
}
