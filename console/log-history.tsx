import { useState } from 'preact/hooks';
import { api, plainWords } from './api.js';

/** A kept line as a search answers it (docs/api.md §21); a fleet's search says whose and where. */
export interface HistoryLine {
  readonly at: string;
  readonly run: string | null;
  readonly stream: 'stdout' | 'stderr' | 'agent';
  readonly line: string;
  readonly bot_id?: string;
  readonly node?: string;
}

interface Answer {
  readonly lines: HistoryLine[];
  readonly next?: string | null;
  readonly partial: boolean;
  readonly nodes_missing?: string[];
}

/** Lines around one, either side, when it is opened in context. */
const CONTEXT_MS = 30_000;

/** `text` with each place `q` (a substring) or `pattern` (a regular expression) matches marked. */
function Marked({ text, q, pattern }: { text: string; q: string; pattern: RegExp | undefined }) {
  const spans: Array<{ from: number; to: number }> = [];
  if (pattern) {
    for (const found of text.matchAll(new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`))) {
      if (found[0] === '') break;
      spans.push({ from: found.index, to: found.index + found[0].length });
    }
  } else if (q !== '') {
    for (let at = text.indexOf(q); at >= 0; at = text.indexOf(q, at + q.length)) spans.push({ from: at, to: at + q.length });
  }
  const parts = [];
  let last = 0;
  for (const span of spans) {
    parts.push(text.slice(last, span.from), <mark key={span.from}>{text.slice(span.from, span.to)}</mark>);
    last = span.to;
  }
  parts.push(text.slice(last));
  return <>{parts}</>;
}

/** A datetime-local input's value as ISO 8601 with its zone, or undefined when empty. */
const isoOf = (local: string): string | undefined => (local === '' ? undefined : new Date(local).toISOString());

/**
 * Searches the kept output (docs/api.md §21): a bot's (`botId`) or every bot's, by text or regular expression
 * and time range, the matches marked; a line opens in context (the minute around it, that line marked).
 */
export function LogHistory({ botId }: { botId?: string }) {
  const [q, setQ] = useState('');
  const [regex, setRegex] = useState(false);
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const [answer, setAnswer] = useState<Answer | undefined>(undefined);
  const [context, setContext] = useState<{ line: HistoryLine; lines: HistoryLine[] } | undefined>(undefined);
  const [failure, setFailure] = useState('');
  const [busy, setBusy] = useState(false);
  const base = botId === undefined ? '/api/logs/history' : `/api/bots/${encodeURIComponent(botId)}/logs/history`;
  let pattern: RegExp | undefined;
  try {
    pattern = regex && q !== '' ? new RegExp(q) : undefined;
  } catch {
    pattern = undefined;
  }

  const search = async (cursor?: string) => {
    setBusy(true);
    setFailure('');
    setContext(undefined);
    const params = new URLSearchParams({ limit: '200' });
    if (q !== '') params.set(regex ? 'regex' : 'q', q);
    const from = isoOf(since);
    const to = isoOf(until);
    if (from) params.set('since', from);
    if (to) params.set('until', to);
    if (cursor) params.set('cursor', cursor);
    try {
      const found = await api<Answer>(`${base}?${params}`);
      setAnswer((was) => (cursor && was ? { ...found, lines: [...was.lines, ...found.lines] } : found));
    } catch (err) {
      setFailure(plainWords(err));
    } finally {
      setBusy(false);
    }
  };

  const openContext = async (line: HistoryLine) => {
    const at = Date.parse(line.at);
    const params = new URLSearchParams({ order: 'oldest', limit: '1000', since: new Date(at - CONTEXT_MS).toISOString(), until: new Date(at + CONTEXT_MS).toISOString() });
    const path = line.bot_id === undefined ? base : `/api/bots/${encodeURIComponent(line.bot_id)}/logs/history`;
    try {
      const found = await api<Answer>(`${path}?${params}`);
      setContext({ line, lines: found.lines });
    } catch (err) {
      setFailure(plainWords(err));
    }
  };

  const row = (line: HistoryLine, index: number, marked: boolean) => (
    <li key={`${line.at}-${index}`} class={`${line.stream}${marked ? ' opened' : ''}`} data-testid={marked ? 'context-line' : 'history-line'}>
      <time dateTime={line.at}>{new Date(line.at).toLocaleString()}</time>
      {line.bot_id !== undefined && <span class="who">{line.bot_id} on {line.node}</span>}{' '}
      <code>
        <Marked text={line.line} q={regex ? '' : q} pattern={pattern} />
      </code>
      {!marked && context === undefined && (
        <button type="button" class="link" onClick={() => void openContext(line)}>
          in context
        </button>
      )}
    </li>
  );

  return (
    <div class="history">
      <form
        class="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          void search();
        }}
      >
        <label>
          Lines with{' '}
          <input type="search" value={q} placeholder={regex ? 'regular expression (RE2)' : 'text'} onInput={(e) => setQ(e.currentTarget.value)} data-testid="history-q" />
        </label>
        <label>
          <input type="checkbox" checked={regex} onChange={(e) => setRegex(e.currentTarget.checked)} /> regex
        </label>
        <label>
          from <input type="datetime-local" step={1} value={since} onInput={(e) => setSince(e.currentTarget.value)} />
        </label>
        <label>
          to <input type="datetime-local" step={1} value={until} onInput={(e) => setUntil(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Search
        </button>
      </form>
      {failure !== '' && <p class="failure">{failure}</p>}
      {context !== undefined ? (
        <>
          <p>
            The minute around the line.{' '}
            <button type="button" class="link" onClick={() => setContext(undefined)}>
              Back to the matches
            </button>
          </p>
          <ol class="history-lines">{context.lines.map((line, index) => row(line, index, line.at === context.line.at && line.line === context.line.line))}</ol>
        </>
      ) : (
        answer !== undefined && (
          <>
            <p data-testid="history-count">
              {answer.lines.length === 0 ? 'No line matches.' : `${answer.lines.length} ${answer.lines.length === 1 ? 'line' : 'lines'}, newest first.`}
              {answer.partial && ' The search stopped at its time budget: more may match.'}
              {(answer.nodes_missing ?? []).length > 0 && ` Nodes that did not answer: ${answer.nodes_missing!.join(', ')}.`}
            </p>
            <ol class="history-lines">{answer.lines.map((line, index) => row(line, index, false))}</ol>
            {answer.next && (
              <button type="button" disabled={busy} onClick={() => void search(answer.next ?? undefined)}>
                Older
              </button>
            )}
          </>
        )
      )}
    </div>
  );
}
