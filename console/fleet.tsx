import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, exitReason, megabytes, operate, OPERATION_WORDS } from './api.js';
import type { BotStatus, FleetBot, Operation } from './api.js';
import { ConfirmDialog } from './confirm-dialog.js';
import { usePanelActions } from './panel-actions.js';
import { LogHistory } from './log-history.js';
import { Sparkline } from './sparkline.js';
import { HealthBadge } from './health-badge.js';
import { useEvents } from './use-events.js';

const ROW_HEIGHT = 44;
/** Rows drawn beyond those in sight, above and below, so that scrolling never shows a gap. */
const OVERSCAN = 10;
/** The samples' pace: the table is read again as often. */
const REFRESH_MS = 15_000;

type SortKey = 'bot_id' | 'user_id' | 'image' | 'revision' | 'node' | 'state' | 'uptime' | 'cpu' | 'memory' | 'restarts_last_hour' | 'crashes_last_hour' | 'last_exit' | 'next_schedule';
const STATES = ['all', 'running', 'crash-looping', 'given-up', 'exited', 'stopped'] as const;

const last = (values: number[]): number | undefined => values[values.length - 1];

/** A node of the fleet as GET /api/admin/nodes answers it (docs/api.md §17). */
interface FleetNode {
  node: string;
  alive: boolean;
  seen_at: string;
  bots: number;
  running: number;
  self: boolean;
}

function sortValue(bot: FleetBot, key: SortKey): string | number {
  switch (key) {
    case 'cpu':
      return last(bot.sparkline.cpu_percent) ?? -1;
    case 'memory':
      return last(bot.sparkline.memory_bytes) ?? -1;
    case 'uptime':
      return bot.started_at ? -Date.parse(bot.started_at) : -Infinity;
    case 'last_exit':
      return bot.last_exit ? Date.parse(bot.last_exit.at) : 0;
    case 'next_schedule':
      return bot.next_schedule ? Date.parse(bot.next_schedule.at) : Infinity;
    case 'state':
      return STATES.indexOf(bot.state);
    case 'image':
      return bot.image ?? '';
    case 'revision':
      return bot.revision ?? 0;
    default:
      return bot[key] ?? '';
  }
}

/** Every bot in one table: sorted, filtered, searched, drawn only where it is seen, and kept current by the events. */
export function Fleet({ onForbidden }: { onForbidden: (err: unknown) => boolean }) {
  const [bots, setBots] = useState<Map<string, FleetBot>>(new Map());
  const [loaded, setLoaded] = useState(false);
  const [failure, setFailure] = useState<string>();
  const [search, setSearch] = useState('');
  const [stateFilter, setStateFilter] = useState<(typeof STATES)[number]>('all');
  const [nodeFilter, setNodeFilter] = useState('all');
  const [nodes, setNodes] = useState<FleetNode[]>([]);
  const [sort, setSort] = useState<{ key: SortKey; descending: boolean }>({ key: 'bot_id', descending: false });
  const [scrollTop, setScrollTop] = useState(0);
  const [viewHeight, setViewHeight] = useState(600);
  const scroller = useRef<HTMLDivElement>(null);
  // An operation asked from a row, asked again first; its answer above the table.
  const [asked, setAsked] = useState<{ bot: FleetBot; operation: Operation }>();
  // Nothing loaded again after a row's action: the events stream brings its row's new state.
  const { busy, answer, act } = usePanelActions(() => undefined);

  const load = async () => {
    try {
      const { bots: listed } = await api<{ bots: FleetBot[] }>('/api/console/fleet');
      setBots(new Map(listed.map((bot) => [bot.bot_id, bot])));
      // Asked once the table is allowed: a page without a session asks nothing more.
      void api<{ nodes: FleetNode[] }>('/api/admin/nodes').then(({ nodes: listedNodes }) => setNodes(listedNodes), () => undefined);
      setFailure(undefined);
      setLoaded(true);
    } catch (err) {
      if (!onForbidden(err)) setFailure((err as Error).message);
    }
  };

  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(timer);
  }, []);

  // An event changes one bot: its row is read again at once, a burst of a bot's events once; none once the table is gone.
  const pending = useRef(new Map<string, ReturnType<typeof setTimeout>>());
  useEffect(() => () => pending.current.forEach((timer) => clearTimeout(timer)), []);
  useEvents('/api/events', (event) => {
    if (pending.current.has(event.bot_id)) return;
    pending.current.set(event.bot_id, setTimeout(async () => {
      pending.current.delete(event.bot_id);
      try {
        const { bot } = await api<{ bot: BotStatus }>(`/api/bots/${encodeURIComponent(event.bot_id)}`);
        setBots((current) => {
          const known = current.get(bot.bot_id);
          if (!known) {
            void load();
            return current;
          }
          const next = new Map(current);
          const { last_exit, ...status } = bot;
          next.set(bot.bot_id, { ...known, ...status, last_exit, restarts_last_hour: known.restarts_last_hour + (event.type === 'exited' ? 1 : 0) });
          return next;
        });
      } catch (err) {
        // Removed meanwhile: its row goes now (any other failure waits for the next reading of the table).
        if (err instanceof ApiError && err.status === 404) {
          setBots((current) => {
            const next = new Map(current);
            next.delete(event.bot_id);
            return next;
          });
        }
      }
    }, 200));
  });

  useEffect(() => {
    const element = scroller.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setViewHeight(element.clientHeight));
    observer.observe(element);
    return () => observer.disconnect();
  }, [loaded]);

  const shown = useMemo(() => {
    const needle = search.trim().toLowerCase();
    const rows = [...bots.values()].filter(
      (bot) =>
        (stateFilter === 'all' || bot.state === stateFilter) &&
        (nodeFilter === 'all' || bot.node === nodeFilter) &&
        (needle === '' || bot.bot_id.toLowerCase().includes(needle) || (bot.user_id ?? '').toLowerCase().includes(needle)),
    );
    const sign = sort.descending ? -1 : 1;
    return rows.sort((a, b) => {
      const [x, y] = [sortValue(a, sort.key), sortValue(b, sort.key)];
      return (x < y ? -1 : x > y ? 1 : a.bot_id < b.bot_id ? -1 : 1) * sign;
    });
  }, [bots, search, stateFilter, nodeFilter, sort]);

  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const end = Math.min(shown.length, Math.ceil((scrollTop + viewHeight) / ROW_HEIGHT) + OVERSCAN);
  const crashLooping = [...bots.values()].filter((bot) => bot.state === 'crash-looping').length;
  const unhealthy = [...bots.values()].filter((bot) => bot.health.status === 'unhealthy').length;
  const nodeNames = [...new Set([...nodes.map((node) => node.node), ...[...bots.values()].map((bot) => bot.node)])].sort();
  const away = nodes.filter((node) => !node.alive);

  const run = ({ bot, operation }: { bot: FleetBot; operation: Operation }) => {
    setAsked(undefined);
    return act(async () => ({ message: await operate(bot.bot_id, bot.user_id, operation) }), '', { pending: `${operation}…`, prefix: `${bot.bot_id}: ` });
  };

  const header = (key: SortKey, label: string) => (
    <th scope="col" aria-sort={sort.key === key ? (sort.descending ? 'descending' : 'ascending') : 'none'}>
      <button type="button" class="sort" onClick={() => setSort({ key, descending: sort.key === key ? !sort.descending : false })}>
        {label}
        <span aria-hidden="true">{sort.key === key ? (sort.descending ? ' ▾' : ' ▴') : ''}</span>
      </button>
    </th>
  );

  return (
    <section aria-labelledby="fleet-title">
      <div class="toolbar">
        <h1 id="fleet-title">
          Bots <span class="count">{shown.length === bots.size ? bots.size : `${shown.length} of ${bots.size}`}</span>
          {crashLooping > 0 && <span class="badge crash-looping">{crashLooping} crash-looping</span>}
          {unhealthy > 0 && <span class="badge health-unhealthy">{unhealthy} unhealthy</span>}
        </h1>
        <label>
          Search <input type="search" value={search} placeholder="bot id or owner" onInput={(e) => setSearch(e.currentTarget.value)} />
        </label>
        {nodeNames.length > 1 && (
          <label>
            Node{' '}
            <select value={nodeFilter} onChange={(e) => setNodeFilter(e.currentTarget.value)}>
              {['all', ...nodeNames].map((name) => (
                <option value={name}>{name}</option>
              ))}
            </select>
          </label>
        )}
        <label>
          State{' '}
          <select value={stateFilter} onChange={(e) => setStateFilter(e.currentTarget.value as (typeof STATES)[number])}>
            {STATES.map((state) => (
              <option value={state}>{state}</option>
            ))}
          </select>
        </label>
      </div>
      {away.length > 0 && (
        <ul class="nodes-away" aria-label="Nodes away">
          {away.map((node) => (
            <li key={node.node} data-node={node.node}>
              <span class="badge crash-looping">away</span> node {node.node} since {new Date(node.seen_at).toLocaleString()}: its {node.bots} bots are shown as
              last known; {node.running} of them were running then
            </li>
          ))}
        </ul>
      )}
      {failure && (
        <p class="failure" role="alert">
          {failure}
        </p>
      )}
      <p class={answer?.ok === false ? 'answer failure' : 'answer'} role="status" aria-live="polite" data-testid="row-answer">
        {answer?.text ?? ''}
      </p>
      <ConfirmDialog
        open={asked !== undefined}
        titleId="row-confirm-title"
        title={`${asked?.operation ?? ''} ${asked?.bot.bot_id ?? ''}?`}
        confirm={`Yes, ${asked?.operation ?? ''}`}
        onConfirm={() => asked && void run(asked)}
        onCancel={() => setAsked(undefined)}
      >
        {asked && OPERATION_WORDS[asked.operation]}
      </ConfirmDialog>
      {!loaded && !failure && <p>Loading…</p>}
      {loaded && (
        <div class="scroller" ref={scroller} tabIndex={0} aria-label="The bots" onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}>
          <table class="fleet" aria-rowcount={shown.length + 1}>
            <thead>
              <tr>
                {header('bot_id', 'Bot')}
                {header('user_id', 'Owner')}
                {header('image', 'Image')}
                {header('revision', 'Rev.')}
                {header('node', 'Node')}
                {header('state', 'State')}
                <th scope="col">Actions</th>
                {header('uptime', 'Uptime')}
                {header('cpu', 'CPU')}
                {header('memory', 'Memory')}
                {header('restarts_last_hour', 'Restarts 1 h')}
                {header('crashes_last_hour', 'Crashes 1 h')}
                {header('last_exit', 'Last exit')}
                {header('next_schedule', 'Next scheduled')}
              </tr>
            </thead>
            <tbody>
              {first > 0 && <tr class="spacer" style={{ height: `${first * ROW_HEIGHT}px` }} aria-hidden="true" />}
              {shown.slice(first, end).map((bot, i) => (
                <tr key={bot.bot_id} class={`row ${bot.state}${bot.last_known ? ' last-known' : ''}`} aria-rowindex={first + i + 2} data-bot={bot.bot_id}>
                  <td>
                    <a href={`#/bots/${encodeURIComponent(bot.bot_id)}`}>{bot.bot_id}</a>
                  </td>
                  <td>{bot.user_id ?? '—'}</td>
                  <td class="image" title={bot.image ?? undefined}>
                    {bot.image ?? '—'}
                  </td>
                  <td class="number">{bot.revision ?? '—'}</td>
                  <td>{bot.node}</td>
                  <td>
                    <span class={`badge ${bot.state}`}>{bot.state}</span>{' '}
                    {bot.last_known ? (
                      <span class="badge last-known" title={`as its node's agent last said, ${new Date(bot.last_known).toLocaleString()}`}>
                        last known
                      </span>
                    ) : (
                      <HealthBadge health={bot.health} />
                    )}
                  </td>
                  <td class="row-actions">
                    {(['restart', 'stop', 'start'] as const).map((operation) => (
                      <button
                        type="button"
                        class={operation}
                        aria-label={`${operation[0]!.toUpperCase()}${operation.slice(1)} ${bot.bot_id}`}
                        title={OPERATION_WORDS[operation]}
                        disabled={bot.last_known !== undefined || busy || (operation === 'start' ? bot.state === 'running' : operation === 'stop' && bot.state === 'stopped')}
                        onClick={() => setAsked({ bot, operation })}
                      >
                        {operation[0]!.toUpperCase() + operation.slice(1)}
                      </button>
                    ))}
                  </td>
                  <td>{bot.uptime ?? '—'}</td>
                  <td class="number">
                    <Sparkline values={bot.sparkline.cpu_percent} label="CPU" /> {bot.state === 'running' ? `${(last(bot.sparkline.cpu_percent) ?? 0).toFixed(1)} %` : '—'}
                  </td>
                  <td class="number">
                    <Sparkline values={bot.sparkline.memory_bytes} label="Memory" />{' '}
                    {bot.state === 'running' && last(bot.sparkline.memory_bytes) !== undefined ? megabytes(last(bot.sparkline.memory_bytes)!) : '—'}
                  </td>
                  <td class="number">{bot.restarts_last_hour}</td>
                  <td class="number">{bot.crashes_last_hour}</td>
                  <td>{exitReason(bot.last_exit)}</td>
                  <td data-testid="next-schedule">
                    {bot.next_schedule ? (
                      <>
                        {bot.next_schedule.action} at <time dateTime={bot.next_schedule.at}>{new Date(bot.next_schedule.at).toLocaleString()}</time>
                      </>
                    ) : (
                      '—'
                    )}
                  </td>
                </tr>
              ))}
              {end < shown.length && <tr class="spacer" style={{ height: `${(shown.length - end) * ROW_HEIGHT}px` }} aria-hidden="true" />}
            </tbody>
          </table>
          {shown.length === 0 && <p class="empty">No bot matches.</p>}
        </div>
      )}
      <section aria-labelledby="fleet-history-title" class="panel wide fleet-history">
        <h2 id="fleet-history-title">Every bot's log history</h2>
        <LogHistory />
      </section>
    </section>
  );
}
