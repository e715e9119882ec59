import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, exitReason } from './api.js';
import type { ExitRecord, ExitSummary } from './api.js';

/** A line of the tail: what the bot wrote, or the mark of a run's end. */
interface TailLine {
  readonly n: number;
  readonly text: string;
  readonly kind: 'stdout' | 'stderr' | 'exit';
}

/** The most lines the page keeps; older ones leave. */
const KEEP = 5_000;
/** Lines the tail begins with. */
const FIRST_LINES = 200;

/**
 * The bot's live logs: the agent's `follow=true` stream (docs/api.md §10), which
 * goes on across restarts and marks each run's end. Paused, it keeps what comes,
 * within the same bound as what is drawn (the newest KEEP lines), and shows it on resume. The filter is a regular expression; the download is
 * what is shown.
 */
export function LogTail({ botId }: { botId: string }) {
  const [lines, setLines] = useState<TailLine[]>([]);
  const [paused, setPaused] = useState(false);
  const [filter, setFilter] = useState('');
  const [connection, setConnection] = useState('connecting');
  const counter = useRef(0);
  const waiting = useRef<TailLine[]>([]);
  /** While paused: how many lines wait, and how many older ones left past the bound (drawn at each batch). */
  const [held, setHeld] = useState({ waiting: 0, dropped: 0 });
  const dropped = useRef(0);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  const view = useRef<HTMLPreElement>(null);

  useEffect(() => {
    setLines([]);
    let source: EventSource | undefined;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let flush: ReturnType<typeof setTimeout> | undefined;
    const add = (line: Omit<TailLine, 'n'>) => {
      waiting.current.push({ ...line, n: (counter.current += 1) });
      // A bot that writes fast while the tail is paused: only the newest KEEP lines could be drawn on resume.
      if (waiting.current.length > KEEP) dropped.current += waiting.current.splice(0, waiting.current.length - KEEP).length;
      // Lines that arrive together are drawn together.
      flush ??= setTimeout(() => {
        flush = undefined;
        if (pausedRef.current) {
          setHeld({ waiting: waiting.current.length, dropped: dropped.current });
          return;
        }
        const arrived = waiting.current.splice(0);
        setLines((shown) => [...shown, ...arrived].slice(-KEEP));
      }, 50);
    };
    const ended = (at: string, exit: ExitSummary | null) => add({ text: `── the run ended ${new Date(at).toLocaleTimeString()}: ${exitReason(exit)} ──`, kind: 'exit' });
    let closed = false;
    /**
     * `first` lines, which may span earlier runs of the bot, then what comes. The stream marks the ends of runs
     * from now on; those before are marked from the bot's exit records, between the last line before each
     * end and the first after it.
     */
    const open = async (first: number) => {
      const before = first === 0 ? [] : await api<{ exits: ExitRecord[] }>(`/api/bots/${encodeURIComponent(botId)}/exits?limit=50`).then(
        ({ exits }) => exits.map((exit) => ({ at: Date.parse(exit.at), exit })).sort((a, b) => a.at - b.at),
        () => [],
      );
      if (closed) return;
      let lastAt: number | undefined;
      source = new EventSource(`/api/bots/${encodeURIComponent(botId)}/logs?follow=true&lines=${first}`, { withCredentials: true });
      source.onopen = () => setConnection('live');
      source.addEventListener('log', (message: MessageEvent<string>) => {
        const { line, stream, at } = JSON.parse(message.data) as { line: string; stream: 'stdout' | 'stderr'; at: string };
        const lineAt = Date.parse(at);
        while (before.length > 0 && before[0]!.at < lineAt) {
          const { exit } = before.shift()!;
          if (lastAt !== undefined && Date.parse(exit.at) >= lastAt) ended(exit.at, exit);
        }
        lastAt = lineAt;
        add({ text: line, kind: stream });
      });
      source.addEventListener('exited', (message: MessageEvent<string>) => {
        const event = JSON.parse(message.data) as { at: string; exit?: ExitSummary };
        before.splice(0);
        ended(event.at, event.exit ?? null);
      });
      // The stream has no cursor: rather than the browser's own retry (which would send the first lines
      // again), it is opened anew for what comes from now on.
      source.onerror = () => {
        source?.close();
        setConnection('reconnecting');
        retry = setTimeout(() => void open(0), 2_000);
      };
    };
    void open(FIRST_LINES);
    return () => {
      closed = true;
      source?.close();
      clearTimeout(retry);
      clearTimeout(flush);
    };
  }, [botId]);

  useEffect(() => {
    dropped.current = 0;
    setHeld({ waiting: waiting.current.length, dropped: 0 });
    if (paused) return;
    const arrived = waiting.current.splice(0);
    if (arrived.length > 0) setLines((shown) => [...shown, ...arrived].slice(-KEEP));
  }, [paused]);

  const pattern = useMemo(() => {
    if (filter === '') return undefined;
    try {
      return new RegExp(filter, 'i');
    } catch {
      return null;
    }
  }, [filter]);
  const shown = pattern ? lines.filter((line) => line.kind === 'exit' || pattern.test(line.text)) : lines;

  useEffect(() => {
    const element = view.current;
    if (element && !paused) element.scrollTop = element.scrollHeight;
  }, [shown.length, paused]);

  const download = () => {
    const blob = new Blob([shown.map((line) => line.text).join('\n') + '\n'], { type: 'text/plain' });
    const link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = `${botId}-logs.txt`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1_000);
  };

  return (
    <div class="tail">
      <div class="toolbar">
        <button type="button" aria-pressed={paused} onClick={() => setPaused(!paused)}>
          {paused ? 'Resume' : 'Pause'}
        </button>
        <label>
          Filter{' '}
          <input
            type="text"
            value={filter}
            placeholder="regular expression"
            aria-invalid={pattern === null}
            onInput={(e) => setFilter(e.currentTarget.value)}
          />
        </label>
        {pattern === null && <span class="failure">not a regular expression</span>}
        <button type="button" onClick={download}>
          Download
        </button>
        <span class="connection" data-testid="connection">
          {paused ? `paused, ${held.waiting} waiting${held.dropped > 0 ? `, ${held.dropped} older dropped` : ''}` : connection}
        </span>
      </div>
      <pre class="log" ref={view} tabIndex={0} aria-label="Log lines" data-testid="log">
        {shown.map((line) => (
          <span key={line.n} class={`line ${line.kind}`}>
            {line.text}
            {'\n'}
          </span>
        ))}
      </pre>
    </div>
  );
}
