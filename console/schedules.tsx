import { useEffect, useMemo, useState } from 'preact/hooks';
import { ConfirmDialog } from './confirm-dialog.js';
import { newestOnly } from './newest.js';
import { usePanelActions } from './panel-actions.js';
import { api, clock, plainWords } from './api.js';
import type { BotEvent } from './api.js';

/** A schedule as the agent answers it (docs/api.md §18). */
interface Schedule {
  id: string;
  name: string | null;
  cron: string;
  time_zone: string;
  enabled: boolean;
  actions: { type: string; offset_s: number }[];
  next_due_at: string[];
}

/** One run of a schedule. */
interface ScheduleRun {
  due_at: string;
  state: string;
  reason: string | null;
  actions: { type: string; outcome: string; message: string | null; output?: string }[];
}

/** The events of a schedule's runs: each reloads the list. */
export const SCHEDULE_EVENTS = new Set(['schedule-started', 'schedule-succeeded', 'schedule-failed', 'schedule-skipped']);

const chainOf = (schedule: Schedule): string => schedule.actions.map((action) => (action.offset_s > 0 ? `+${action.offset_s} s ${action.type}` : action.type)).join(', ');

/**
 * A bot's schedules (docs/api.md §18): each with its next due times in the operator's own clock, turned on and
 * off, run now (asked again first, as a restart is), and the history of its runs.
 */
export function Schedules({ botId, events }: { botId: string; events: BotEvent[] }) {
  const [schedules, setSchedules] = useState<Schedule[]>();
  const [shown, setShown] = useState<string>();
  const [runs, setRuns] = useState<ScheduleRun[]>();
  const [asked, setAsked] = useState<Schedule>();
  // Each action loads the panel again (load is defined below, and called only once it is).
  const { busy, answer, setAnswer, act } = usePanelActions(() => load());
  const path = `/api/admin/bots/${encodeURIComponent(botId)}/schedules`;
  const newest = events.find((event) => SCHEDULE_EVENTS.has(event.type));
  const turn = useMemo(newestOnly, [botId]);

  const load = async () => {
    const newest = turn();
    try {
      const { schedules: kept } = await api<{ schedules: Schedule[] }>(path);
      const open = shown ?? kept[0]?.id;
      const listed = open ? (await api<{ runs: ScheduleRun[] }>(`/api/bots/${encodeURIComponent(botId)}/schedules/${open}/runs?limit=20`)).runs : [];
      if (!newest()) return;
      setSchedules(kept);
      setShown(open);
      setRuns(listed);
    } catch (err) {
      if (newest()) setAnswer({ ok: false, text: plainWords(err) });
    }
  };
  useEffect(() => void load(), [botId, shown, newest?.id]);

  const toggle = (schedule: Schedule) =>
    void act(() => api(`${path}/${schedule.id}/${schedule.enabled ? 'disable' : 'enable'}`, { method: 'POST' }), `${schedule.name ?? schedule.id} turned ${schedule.enabled ? 'off' : 'on'}`);
  const runNow = () => {
    const schedule = asked;
    setAsked(undefined);
    if (schedule) void act(() => api<{ message: string }>(`${path}/${schedule.id}/run`, { method: 'POST' }), '');
  };

  return (
    <section aria-labelledby="schedules-title" class="panel wide">
      <h2 id="schedules-title">Schedules</h2>
      <p class={answer?.ok === false ? 'answer failure' : 'answer'} role="status" aria-live="polite" data-testid="schedule-answer">
        {answer?.text ?? ''}
      </p>
      <ConfirmDialog
        open={asked !== undefined}
        titleId="schedule-confirm-title"
        title={`Run ${asked?.name ?? asked?.id ?? ''} now?`}
        confirm="Yes, run now"
        onConfirm={runNow}
        onCancel={() => setAsked(undefined)}
      >
        {`Its actions run now, in order: ${asked ? chainOf(asked) : ''}.`}
      </ConfirmDialog>
      {schedules === undefined ? (
        <p>Loading…</p>
      ) : schedules.length === 0 ? (
        <p>This bot has no schedules (POST {path}, docs/api.md §18).</p>
      ) : (
        <table data-testid="schedules">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">When</th>
              <th scope="col">Actions</th>
              <th scope="col">Next runs (your time)</th>
              <th scope="col" />
            </tr>
          </thead>
          <tbody>
            {schedules.map((schedule) => (
              <tr key={schedule.id} data-schedule={schedule.id} class={schedule.id === shown ? 'current' : undefined}>
                <td>
                  <button type="button" class="link" onClick={() => setShown(schedule.id)}>
                    {schedule.name || schedule.id}
                  </button>
                </td>
                <td>
                  <code>{schedule.cron}</code> ({schedule.time_zone})
                </td>
                <td>{chainOf(schedule)}</td>
                <td data-testid="next-runs">
                  {schedule.enabled ? schedule.next_due_at.slice(0, 3).map((due) => <time key={due} dateTime={due}>{clock(due)} </time>) : 'off'}
                </td>
                <td class="actions">
                  <button type="button" class="toggle" disabled={busy} onClick={() => toggle(schedule)}>
                    {schedule.enabled ? 'Turn off' : 'Turn on'}
                  </button>
                  <button type="button" class="run-now" disabled={busy} onClick={() => setAsked(schedule)}>
                    Run now
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {runs !== undefined && shown !== undefined && (
        <table data-testid="schedule-runs">
          <caption>Runs of {schedules?.find((one) => one.id === shown)?.name || shown}</caption>
          <thead>
            <tr>
              <th scope="col">Due</th>
              <th scope="col">State</th>
              <th scope="col">What happened</th>
            </tr>
          </thead>
          <tbody>
            {runs.length === 0 ? (
              <tr>
                <td colSpan={3}>No run yet.</td>
              </tr>
            ) : (
              runs.map((run) => (
                <tr key={run.due_at} data-state={run.state}>
                  <td>
                    <time dateTime={run.due_at}>{clock(run.due_at)}</time>
                  </td>
                  <td class={`outcome ${run.state}`}>{run.state}</td>
                  <td>
                    <details>
                      <summary>{run.reason ?? run.actions.map((action) => `${action.type} ${action.outcome}`).join(', ')}</summary>
                      <pre class="lines">{run.actions.map((action) => `${action.type}: ${action.outcome}${action.message ? ` (${action.message})` : ''}${action.output ? `\n${action.output}` : ''}`).join('\n')}</pre>
                    </details>
                  </td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
