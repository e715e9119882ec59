import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, clock, exitReason, operate, OPERATION_WORDS, plainWords } from './api.js';
import type { BotEvent, BotStatus, ExitRecord, Operation } from './api.js';
import { Charts } from './charts.js';
import { HealthBadge } from './health-badge.js';
import { newestOnly } from './newest.js';
import { LogHistory } from './log-history.js';
import { LogTail } from './log-tail.js';
import { DEPLOY_EVENTS, Deploys, deployWords } from './deploys.js';
import { Schedules } from './schedules.js';
import { Backups } from './backups.js';
import { useEvents } from './use-events.js';
import { ConfirmDialog } from './confirm-dialog.js';
import { usePanelActions } from './panel-actions.js';

/** One bot: its state, its buttons, its live logs, its crashes, its events and its charts. */
export function Bot({ botId, onForbidden }: { botId: string; onForbidden: (err: unknown) => boolean }) {
  const [status, setStatus] = useState<BotStatus>();
  const [failure, setFailure] = useState<string>();
  const [exits, setExits] = useState<ExitRecord[]>([]);
  const [events, setEvents] = useState<BotEvent[]>([]);
  const [opened, setOpened] = useState<ReadonlySet<string>>(new Set());
  const path = `/api/bots/${encodeURIComponent(botId)}`;
  const turn = useMemo(newestOnly, [botId]);

  const load = async () => {
    const newest = turn();
    try {
      const [{ bot }, { exits: kept }] = await Promise.all([api<{ bot: BotStatus }>(path), api<{ exits: ExitRecord[] }>(`${path}/exits?limit=50`)]);
      if (!newest()) return;
      setStatus(bot);
      setExits(kept);
      setFailure(undefined);
    } catch (err) {
      if (newest() && !onForbidden(err)) setFailure(plainWords(err));
    }
  };

  useEffect(() => {
    setEvents([]);
    void load();
  }, [botId]);

  // Every kept event of the bot first, then live ones; each one changes what the page shows.
  useEvents(`${path}/events?after=0`, (event) => {
    setEvents((shown) => [event, ...shown].slice(0, 200));
    void load();
  });

  if (failure && !status) {
    return (
      <p class="failure" role="alert">
        {failure}
      </p>
    );
  }
  if (!status) return <p>Loading…</p>;
  return (
    <article aria-labelledby="bot-title">
      <p>
        <a href="#/">← All bots</a>
      </p>
      <div class="toolbar">
        <h1 id="bot-title">{botId}</h1>
        <span class={`badge ${status.state}`} data-testid="state">
          {status.state}
        </span>
        <HealthBadge health={status.health} />
        <span>owner {status.user_id ?? '—'}</span>
        <span>up {status.uptime ?? '—'}</span>
        <span>
          {status.crashes_last_hour} {status.crashes_last_hour === 1 ? 'crash' : 'crashes'} in the last hour
        </span>
      </div>
      {status.health.status === 'unhealthy' && status.health.output !== null && (
        <p class="failure" data-testid="health-output">
          Unhealthy since {clock(status.health.since ?? '')} ({status.health.check}): {status.health.output}
        </p>
      )}
      <Actions status={status} onDone={load} />
      <div class="panels">
        <section aria-labelledby="logs-title" class="panel wide">
          <h2 id="logs-title">Live logs</h2>
          <LogTail botId={botId} />
        </section>
        <section aria-labelledby="history-title" class="panel wide">
          <h2 id="history-title">Log history</h2>
          <LogHistory botId={botId} />
        </section>
        <Deploys botId={botId} events={events} />
        <Schedules botId={botId} events={events} />
        <Backups botId={botId} data={status.data ?? []} events={events} />
        <section aria-labelledby="charts-title" class="panel">
          <h2 id="charts-title">CPU, memory and network, last 15 minutes</h2>
          <Charts botId={botId} />
        </section>
        <section aria-labelledby="timeline-title" class="panel">
          <h2 id="timeline-title">Crash timeline</h2>
          {exits.length === 0 ? (
            <p>No run of this bot has ended yet.</p>
          ) : (
            <ol class="timeline">
              {exits.map((exit) => (
                <li key={exit.at} class={exit.requested ? 'requested' : 'crash'}>
                  {/* Kept open across the list's refreshes, which a crash-looping bot makes often. */}
                  <details
                    open={opened.has(exit.at)}
                    onToggle={(event) => {
                      const open = event.currentTarget.open;
                      setOpened((was) => (open === was.has(exit.at) ? was : open ? new Set(was).add(exit.at) : new Set([...was].filter((at) => at !== exit.at))));
                    }}
                  >
                    <summary>
                      <time dateTime={exit.at}>{clock(exit.at)}</time> — {exitReason(exit)}
                    </summary>
                    <pre class="lines">{exit.logs || '(no lines)'}</pre>
                  </details>
                </li>
              ))}
            </ol>
          )}
        </section>
        <section aria-labelledby="events-title" class="panel">
          <h2 id="events-title">Events</h2>
          <EventList events={events} />
        </section>
      </div>
    </article>
  );
}

/** Restart, stop and start, each asked again before it is done, each answer shown. */
function Actions({ status, onDone }: { status: BotStatus; onDone: () => void }) {
  const [asked, setAsked] = useState<Operation>();
  const { busy, answer, act } = usePanelActions(onDone);

  const run = (operation: Operation) => {
    setAsked(undefined);
    return act(async () => ({ message: await operate(status.bot_id, status.user_id, operation) }), '', { pending: `${operation}…` });
  };

  return (
    <div class="actions">
      {(['restart', 'stop', 'start'] as const).map((operation) => (
        <button type="button" class={operation} disabled={busy} onClick={() => setAsked(operation)}>
          {operation[0]!.toUpperCase() + operation.slice(1)}
        </button>
      ))}
      <p class={answer?.ok === false ? 'answer failure' : 'answer'} role="status" aria-live="polite" data-testid="answer">
        {answer?.text ?? ''}
      </p>
      <ConfirmDialog
        open={asked !== undefined}
        titleId="confirm-title"
        title={`${asked ?? ''} ${status.bot_id}?`}
        confirm={`Yes, ${asked ?? ''}`}
        onConfirm={() => asked && void run(asked)}
        onCancel={() => setAsked(undefined)}
      >
        {asked && OPERATION_WORDS[asked]}
      </ConfirmDialog>
    </div>
  );
}

/** What an event says, in a few words. */
export function describe(event: BotEvent): string {
  switch (event.type) {
    case 'exited':
      return `exited: ${exitReason(event.exit as ExitRecord)}`;
    case 'operation':
      return `${String(event.operation)} by ${String(event.by)}: ${String(event.result)}`;
    case 'crash-looping':
      return `crash-looping: ${String(event.crashes)} crashes within ${String(event.window_s)} s`;
    case 'unhealthy':
      return `unhealthy (${String(event.check)}): ${String(event.output ?? '')}`;
    case 'restarted':
      return `restarted by the watchdog: unhealthy (${String(event.check)})`;
    case 'given-up':
      return `given up: ${String(event.crashes)} crashes within ${String(event.window_s)} s, the most its restart policy allows; stopped`;
    case 'backing-off':
      return `backing off: ${String(event.crashes)} crashes; stopped for ${String(event.wait_s)} s, until ${String(event.until)}`;
    default:
      return DEPLOY_EVENTS.has(event.type) ? deployWords(event) : event.type;
  }
}

export function EventList({ events, showBot = false }: { events: BotEvent[]; showBot?: boolean }) {
  if (events.length === 0) return <p>No events yet.</p>;
  return (
    <ol class="events">
      {events.map((event) => (
        <li key={event.id} class={`event ${event.type}`}>
          <time dateTime={event.at}>{clock(event.at)}</time>{' '}
          {showBot && <a href={`#/bots/${encodeURIComponent(event.bot_id)}`}>{event.bot_id}</a>} <span>{describe(event)}</span>
        </li>
      ))}
    </ol>
  );
}
