import { useEffect, useMemo, useState } from 'preact/hooks';
import { ConfirmDialog } from './confirm-dialog.js';
import { newestOnly } from './newest.js';
import { usePanelActions } from './panel-actions.js';
import { api, clock, megabytes, plainWords } from './api.js';
import type { BotEvent, Revision } from './api.js';

/** The events of a deploy (docs/api.md §§14-15): each one shows as the deploy's progress and reloads the revisions. */
export const DEPLOY_EVENTS = new Set(['pulling', 'pulled', 'pull-failed', 'deploy-started', 'deploy-succeeded', 'deploy-failed', 'rolled-back']);

/** How often revisions still judged are read again. */
const JUDGING_REFRESH_MS = 2_000;

/** A deploy's progress, in a few words. */
export function deployWords(event: BotEvent): string {
  switch (event.type) {
    case 'pulling':
      return `pulling ${String(event.image)}: ${megabytes(Number(event.bytes))} of ${megabytes(Number(event.total_bytes))}`;
    case 'pulled':
      return `pulled ${String(event.image)} in ${(Number(event.duration_ms) / 1000).toFixed(1)} s`;
    case 'pull-failed':
      return `pull failed: ${String(event.message)}`;
    case 'deploy-started':
      return `revision ${String(event.revision)} started (${String(event.image)}); judged now`;
    case 'deploy-succeeded':
      return `revision ${String(event.revision)} deployed`;
    case 'deploy-failed':
      return `revision ${String(event.revision)} failed: ${String(event.reason)}${event.rolled_back ? '; rolled back' : ''}`;
    case 'rolled-back':
      return `rolled back from revision ${String(event.from_revision)} to revision ${String(event.to_revision)} by ${String(event.by)}`;
    default:
      return event.type;
  }
}

/**
 * A bot's revisions and its deploys: a new image (or the same spec again) deployed from the page with its
 * progress live, each revision's outcome (a failed one's last lines, as a crash's), and the rollback.
 */
export function Deploys({ botId, events }: { botId: string; events: BotEvent[] }) {
  const [revisions, setRevisions] = useState<Revision[]>();
  /** The revision the bot runs now: a rolled-back one may have run since, so its outcome does not say. */
  const [current, setCurrent] = useState<number | null>(null);
  /** The step asked for and not yet confirmed: a deploy or a rollback changes what the bot runs, as a restart does. */
  const [asked, setAsked] = useState<'deploy' | 'rollback'>();
  const [deploys, setDeploys] = useState(true);
  const [image, setImage] = useState('');
  const [minReady, setMinReady] = useState('10');
  const [rollback, setRollback] = useState(true);
  // Each action loads the panel again (load is defined below, and called only once it is).
  const { busy, answer, setAnswer, act } = usePanelActions(() => load());
  const path = `/api/admin/bots/${encodeURIComponent(botId)}`;
  const deployEvents = events.filter((event) => DEPLOY_EVENTS.has(event.type));
  const newest = deployEvents[0];
  const turn = useMemo(newestOnly, [botId]);

  const load = async () => {
    const newest = turn();
    try {
      const { revisions: kept, deploys: offered, current: runs } = await api<{ revisions: Revision[]; deploys: boolean; current: number | null }>(`/api/bots/${encodeURIComponent(botId)}/revisions`);
      if (!newest()) return;
      setRevisions(kept);
      setCurrent(runs);
      setDeploys(offered);
      setImage((shown) => shown || (kept[0]?.spec.image ?? ''));
    } catch (err) {
      if (newest()) setAnswer({ ok: false, text: plainWords(err) });
    }
  };
  useEffect(() => void load(), [botId, newest?.id]);
  // A revision judged without an event when it succeeds (a new bot's first, docs/api.md §15): looked at again until it is judged.
  const judging = revisions?.some((revision) => revision.outcome === 'deploying') ?? false;
  useEffect(() => {
    if (!judging) return;
    const timer = setInterval(() => void load(), JUDGING_REFRESH_MS);
    return () => clearInterval(timer);
  }, [botId, judging]);

  const deploy = () => {
    const change = { ...(image && image !== revisions?.[0]?.spec.image ? { image } : {}), min_ready_s: Number(minReady), rollback };
    void act(() => api<{ message: string }>(path, { method: 'PATCH', body: change }));
  };
  const confirmed = () => {
    const step = asked;
    setAsked(undefined);
    if (step === 'deploy') deploy();
    else if (step === 'rollback') void act(() => api<{ message: string }>(`${path}/rollback`, { method: 'POST' }));
  };
  const logsOf = (revision: number) => deployEvents.find((event) => event.type === 'deploy-failed' && event.revision === revision)?.logs;

  if (!deploys) {
    return (
      <section aria-labelledby="deploys-title" class="panel wide">
        <h2 id="deploys-title">Revisions</h2>
        <p>This agent's runtime has no deploys yet (docs/api.md §15).</p>
      </section>
    );
  }
  return (
    <section aria-labelledby="deploys-title" class="panel wide">
      <h2 id="deploys-title">Revisions</h2>
      <form
        class="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          setAsked('deploy');
        }}
      >
        <label>
          Image <input name="image" value={image} size={40} onInput={(event) => setImage(event.currentTarget.value)} />
        </label>
        <label>
          Up for (s) <input name="min_ready_s" type="number" min={0} max={3600} value={minReady} onInput={(event) => setMinReady(event.currentTarget.value)} />
        </label>
        <label>
          <input name="rollback" type="checkbox" checked={rollback} onChange={(event) => setRollback(event.currentTarget.checked)} /> roll back on failure
        </label>
        <button type="submit" class="deploy" disabled={busy}>
          Deploy
        </button>
        <button type="button" class="rollback" disabled={busy} onClick={() => setAsked('rollback')}>
          Roll back
        </button>
      </form>
      <ConfirmDialog
        open={asked !== undefined}
        titleId="deploy-confirm-title"
        title={asked === 'rollback' ? `Roll ${botId} back?` : `Deploy ${botId}?`}
        confirm={asked === 'rollback' ? 'Yes, roll back' : 'Yes, deploy'}
        onConfirm={confirmed}
        onCancel={() => setAsked(undefined)}
      >
        {asked === 'rollback'
          ? 'The bot stops and runs its previous revision again.'
          : `The bot stops and runs ${image && image !== revisions?.[0]?.spec.image ? image : 'its image'} as a new revision, judged for ${minReady} s${rollback ? ', and undone if it fails' : ''}.`}
      </ConfirmDialog>
      <p class={answer?.ok === false ? 'answer failure' : 'answer'} role="status" aria-live="polite" data-testid="deploy-answer">
        {answer?.text ?? ''}
      </p>
      <p class="answer" aria-live="polite" data-testid="deploy-progress">
        {newest ? `${clock(newest.at)}: ${deployWords(newest)}` : ''}
      </p>
      {revisions === undefined ? (
        <p>Loading…</p>
      ) : (
        <table data-testid="revisions">
          <thead>
            <tr>
              <th scope="col">Revision</th>
              <th scope="col">Image</th>
              <th scope="col">By</th>
              <th scope="col">Made</th>
              <th scope="col">Outcome</th>
            </tr>
          </thead>
          <tbody>
            {revisions.map((revision) => (
              <tr key={revision.revision} data-revision={revision.revision} class={revision.revision === current ? 'current' : undefined}>
                <td>
                  {revision.revision}
                  {revision.revision === current ? <span class="runs-now"> (runs now)</span> : null}
                </td>
                <td>{revision.spec.image ?? '—'}</td>
                <td>{revision.by}</td>
                <td>
                  <time dateTime={revision.at}>{clock(revision.at)}</time>
                </td>
                <td class={`outcome ${revision.outcome}`}>
                  {revision.reason ? (
                    <details>
                      <summary>
                        {revision.outcome}: {revision.reason}
                      </summary>
                      <pre class="lines">{String(logsOf(revision.revision) ?? '(no lines)')}</pre>
                    </details>
                  ) : (
                    revision.outcome
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
