import { useEffect, useMemo, useState } from 'preact/hooks';
import { ConfirmDialog } from './confirm-dialog.js';
import { newestOnly } from './newest.js';
import { usePanelActions } from './panel-actions.js';
import { api, ApiError, clock, megabytes, plainWords } from './api.js';
import type { Backup, BotEvent, DataFolderUse } from './api.js';

/** The events that change a bot's backups: each reloads the list. */
const BACKUP_EVENTS = new Set(['restored', 'restore-failed', 'backup-verified', 'backup-verify-failed']);

type Asked = { what: 'backup' } | { what: 'restore'; backup: Backup };

const verified = (backup: Backup): string =>
  backup.verification === null ? 'not yet' : backup.verification.ok ? `yes, ${clock(backup.verification.at)}` : `failed, ${clock(backup.verification.at)}`;

/**
 * A bot's data and its backups (docs/api.md §19, §20): each backup's time, size, folders, verification, lock and
 * copies; back up now and restore (each asked again first: both stop the bot), verify, lock, download.
 */
export function Backups({ botId, data, events }: { botId: string; data: readonly DataFolderUse[]; events: BotEvent[] }) {
  // null: this agent makes no backups (501: a history in memory with no backup folder, or no provisioning): the panel is left out.
  const [backups, setBackups] = useState<Backup[] | null>();
  const [asked, setAsked] = useState<Asked>();
  // Each action loads the panel again (load is defined below, and called only once it is).
  const { busy, answer, setAnswer, act } = usePanelActions(() => load());
  const path = `/api/admin/bots/${encodeURIComponent(botId)}/backups`;
  const newest = events.find((event) => BACKUP_EVENTS.has(event.type));
  const turn = useMemo(newestOnly, [botId]);

  const load = async () => {
    const newest = turn();
    try {
      const { backups: kept } = await api<{ backups: Backup[] }>(path);
      if (newest()) setBackups(kept);
    } catch (err) {
      if (!newest()) return;
      if (err instanceof ApiError && err.status === 501) setBackups(null);
      else setAnswer({ ok: false, text: plainWords(err) });
    }
  };
  const keepsData = data.length > 0;
  useEffect(() => void (keepsData ? load() : undefined), [botId, keepsData, newest?.id]);
  // A bot without data folders has nothing to back up; an agent that makes no backups (501) shows none.
  if (!keepsData || backups === null) return null;

  const confirmed = () => {
    const chosen = asked;
    setAsked(undefined);
    if (chosen?.what === 'backup') void act(() => api<{ message: string }>(path, { method: 'POST', body: { mode: 'stop' } }), '');
    if (chosen?.what === 'restore') void act(() => api<{ message: string }>(`${path}/${chosen.backup.id}/restore`, { method: 'POST' }), '');
  };
  const used = (folder: DataFolderUse): string =>
    `${folder.path}: ${folder.used_bytes === null ? 'not measured yet' : megabytes(folder.used_bytes)}${folder.size_mb === null ? '' : ` of ${folder.size_mb} MiB`}`;

  return (
    <section aria-labelledby="backups-title" class="panel wide">
      <h2 id="backups-title">Data and backups</h2>
      <p class={answer?.ok === false ? 'answer failure' : 'answer'} role="status" aria-live="polite" data-testid="backup-answer">
        {answer?.text ?? ''}
      </p>
      <ConfirmDialog
        open={asked !== undefined}
        titleId="backup-confirm-title"
        title={asked?.what === 'restore' ? `Restore ${asked.backup.id}?` : 'Back up now?'}
        confirm={asked?.what === 'restore' ? 'Yes, restore' : 'Yes, back up'}
        onConfirm={confirmed}
        onCancel={() => setAsked(undefined)}
      >
        {asked?.what === 'restore'
          ? `The bot is stopped, its data replaced by this backup's (${clock(asked.backup.created_at)}), and started again. Its data as it is now is kept as a backup first.`
          : 'The bot is stopped while its data folders are copied, then started again.'}
      </ConfirmDialog>
      <p data-testid="data-folders">
        {`Data folders: ${data.map(used).join('; ')}. `}
        <button type="button" class="backup-now" disabled={busy} onClick={() => setAsked({ what: 'backup' })}>
          Back up now
        </button>
      </p>
      {backups === undefined ? (
        <p>Loading…</p>
      ) : backups.length === 0 ? (
        <p>No backup of this bot yet.</p>
      ) : (
        <table data-testid="backups">
          <thead>
            <tr>
              <th scope="col">Made (your time)</th>
              <th scope="col">Size</th>
              <th scope="col">How</th>
              <th scope="col">Verified</th>
              <th scope="col">Copies</th>
              <th scope="col" />
            </tr>
          </thead>
          <tbody>
            {backups.map((backup) => (
              <tr key={backup.id} data-backup={backup.id}>
                <td>
                  <time dateTime={backup.created_at}>{clock(backup.created_at)}</time>
                  {backup.locked ? ' (locked)' : ''}
                </td>
                <td>{megabytes(backup.size_bytes)}</td>
                <td>{backup.mode === 'stop' ? `stopped ${backup.downtime_ms ?? 0} ms` : 'live'}</td>
                <td class={backup.verification?.ok === false ? 'failure' : undefined} data-testid="verified">
                  {verified(backup)}
                </td>
                <td>{backup.copies.length === 0 ? '—' : backup.copies.map((copy) => `${copy.store}${copy.ok ? '' : ' (failed)'}`).join(', ')}</td>
                <td class="actions">
                  <button type="button" class="verify" disabled={busy} onClick={() => void act(() => api(`${path}/${backup.id}/verify`, { method: 'POST' }), '')}>
                    Verify
                  </button>
                  <button type="button" class="lock" disabled={busy} onClick={() => void act(() => api(`${path}/${backup.id}/${backup.locked ? 'unlock' : 'lock'}`, { method: 'POST' }), `${backup.id} ${backup.locked ? 'unlocked' : 'locked'}`)}>
                    {backup.locked ? 'Unlock' : 'Lock'}
                  </button>
                  <button type="button" class="restore" disabled={busy} onClick={() => setAsked({ what: 'restore', backup })}>
                    Restore
                  </button>
                  {backup.folders.map((folder) => (
                    <a key={folder.path} href={`${path}/${backup.id}/archive?folder=${encodeURIComponent(folder.path)}`} download>
                      Download {folder.path}
                    </a>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
