import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import test from 'ava';
import { BackupFolder } from '../../src/backups/backup-folder.js';

// The backup folder (docs/api.md §20) over a real disk: whole backups listed, nothing of a failed one kept.
function folder(t: { teardown(fn: () => void): void }): { root: string; backups: BackupFolder } {
  const root = mkdtempSync(join(tmpdir(), 'bot-agent-backup-folder-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  return { root, backups: new BackupFolder(root) };
}

const BOT = 'bot_1_1_files';
const live = async () => ({ mode: 'live' as const, downtime_ms: null });

test('a backup is kept whole: each folder compressed as read, its checksum recorded; listed newest first, and removed', async (t) => {
  const { backups } = folder(t);
  const older = await backups.write(BOT, ['/data'], async () => Readable.from([Buffer.from('first')]), live, new Date('2026-12-01T10:00:00Z'));
  const newer = await backups.write(BOT, ['/data', '/cache'], async (path) => Readable.from([Buffer.from(`of ${path}`)]), live, new Date('2026-12-02T10:00:00Z'));
  t.deepEqual((await backups.list(BOT)).map((kept) => kept.id), [newer.id, older.id]);
  // Made within one second, their ids differ only by their random part: listed by when each began all the same.
  const sameSecond = [];
  for (const ms of [100, 200, 300, 400, 500, 600]) sameSecond.push(await backups.write(BOT, ['/data'], async () => Readable.from([Buffer.from('x')]), live, new Date(`2026-12-03T10:00:00.${ms}Z`)));
  t.deepEqual((await backups.list(BOT)).slice(0, 6).map((kept) => kept.id), sameSecond.map((kept) => kept.id).reverse());
  for (const kept of sameSecond) await backups.remove(BOT, kept.id);
  t.deepEqual(newer.folders.map((kept) => kept.path), ['/data', '/cache']);
  const { stream, size } = await backups.open(newer, newer.folders[1]!);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  t.is(size, newer.folders[1]!.size_bytes);
  t.is(gunzipSync(Buffer.concat(chunks)).toString(), 'of /cache');
  t.true(await backups.remove(BOT, older.id));
  t.false(await backups.remove(BOT, older.id));
  t.deepEqual((await backups.list(BOT)).map((kept) => kept.id), [newer.id]);
  t.is(await backups.get(BOT, '../../etc'), undefined, 'an id that is not one names no file');
});

test('a read that fails half-way, or a failure once copied, keeps nothing of the backup: not listed, no file left', async (t) => {
  const { root, backups } = folder(t);
  const failing = async () =>
    new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024, 1));
        this.destroy(new Error('the engine went away'));
      },
    });
  await t.throwsAsync(backups.write(BOT, ['/data'], failing, live), { message: 'the engine went away' });
  await t.throwsAsync(
    backups.write(BOT, ['/data'], async () => Readable.from([Buffer.from('x')]), async () => Promise.reject(new Error('could not be started again'))),
    { message: 'could not be started again' },
  );
  t.deepEqual(await backups.list(BOT), []);
  t.deepEqual(readdirSync(join(root, BOT)), []);
});
