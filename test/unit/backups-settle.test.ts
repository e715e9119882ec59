import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import { pack } from 'tar-stream';
import { BackupFolder } from '../../src/backups/backup-folder.js';
import { Backups } from '../../src/backups/backups.js';
import type { BotDataRestores, LeftRestore } from '../../src/backups/data-restores.js';
import { NotFound } from '../../src/errors.js';
import { eventually } from '../helpers/eventually.js';

/** A folder's archive as the runtime's archive API gives it: a plain tar, its entries under the folder's last name. */
function dataTar(): Readable {
  const tar = pack();
  tar.entry({ name: 'data', type: 'directory', mode: 0o755 });
  tar.entry({ name: 'data/count', mode: 0o644 }, '1\n');
  tar.finalize();
  return tar as unknown as Readable;
}

// Which restores the runtime holds an agent settles as it starts (docs/api.md §20): those its own folder marks (a
// killed agent of that folder left them) at once; another agent's, maybe under way, only once older than any restore runs.
const HOUR = 60 * 60_000;

function made(t: { teardown(fn: () => void): void }, held: LeftRestore[], { startFails = () => false }: { startFails?: (botId: string) => boolean } = {}) {
  const root = mkdtempSync(join(tmpdir(), 'bot-agent-backups-settle-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const settled: string[] = [];
  const started: string[] = [];
  const scratchTags: string[] = [];
  let releaseScratch = (): void => {};
  const scratchHeld = new Promise<void>((resolve) => {
    releaseScratch = resolve;
  });
  const restores: BotDataRestores = {
    sizes: async () => new Map([['/data', undefined]]),
    scratch: async (_botId, _archives, { tag }) => {
      scratchTags.push(tag);
      held.push({ botId: 'bot_1_1_busy', tag, begunAt: new Date(), startAfter: false });
      await scratchHeld;
      throw new Error('the engine went away');
    },
    leftovers: async () => [...held],
    settle: async (left) => void settled.push(left.tag),
  };
  const folder = new BackupFolder(root);
  const power = {
    running: async () => true,
    stop: async () => undefined,
    start: async (botId: string) => {
      if (startFails(botId)) throw new NotFound(`no bot ${botId}`);
      started.push(botId);
    },
  };
  const archives = { folders: async () => ['/data'], read: async () => Readable.from([Buffer.from('x')]), usage: async () => [] };
  return { root, folder, settled, started, scratchTags, releaseScratch, backups: new Backups(archives, folder, power, restores) };
}

test("a restore the agent's folder marks is settled at once and its bot started if it ran; another's only once older than any restore runs", async (t) => {
  const now = Date.now();
  const held: LeftRestore[] = [
    { botId: 'bot_1_1_mine', tag: 'aaaa0001', begunAt: new Date(now - 1000), startAfter: true },
    { botId: 'bot_1_1_fresh', tag: 'aaaa0002', begunAt: new Date(now - HOUR), startAfter: true },
    { botId: 'bot_1_1_stale', tag: 'aaaa0003', begunAt: new Date(now - 7 * HOUR), startAfter: false },
    { botId: 'bot_1_1_unsaid', tag: 'aaaa0004', begunAt: undefined, startAfter: true },
    { botId: 'bot_1_1_elsewhere', tag: 'aaaa0005', begunAt: undefined, startAfter: true },
  ];
  const { folder, settled, started, backups } = made(t, held);
  await folder.markRestore('aaaa0001', 'bot_1_1_mine');
  t.deepEqual(await backups.settleRestores((botId) => botId !== 'bot_1_1_elsewhere'), { started: ['bot_1_1_mine', 'bot_1_1_unsaid'], failures: [] });
  t.deepEqual(settled, ['aaaa0001', 'aaaa0003', 'aaaa0004']);
  t.deepEqual(started, ['bot_1_1_mine', 'bot_1_1_unsaid']);
  t.deepEqual([...(await folder.restoresMarked()).keys()], [], 'its mark removed once settled');
});

test('a mark whose restore the runtime holds nothing of is removed (of a bot in care); a bot removed since is no failure', async (t) => {
  const { folder, settled, backups } = made(t, [{ botId: 'bot_1_1_gone', tag: 'bbbb0001', begunAt: new Date(), startAfter: true }], { startFails: (botId) => botId === 'bot_1_1_gone' });
  await folder.markRestore('bbbb0001', 'bot_1_1_gone');
  await folder.markRestore('bbbb0002', 'bot_1_1_nothing');
  await folder.markRestore('bbbb0003', 'bot_1_1_elsewhere');
  t.deepEqual(await backups.settleRestores((botId) => botId !== 'bot_1_1_elsewhere'), { started: [], failures: [] });
  t.deepEqual(settled, ['bbbb0001']);
  t.deepEqual([...(await folder.restoresMarked()).entries()], [['bbbb0003', 'bot_1_1_elsewhere']]);
});

test('a mark a SIGKILL tore as it was written names no bot, and is still the folder\'s', async (t) => {
  const { root, folder, settled, backups } = made(t, [{ botId: 'bot_1_1_torn', tag: 'cccc0001', begunAt: new Date(), startAfter: false }]);
  await folder.markRestore('cccc0002', 'bot_1_1_x');
  writeFileSync(join(root, '.restoring', 'cccc0001'), '');
  t.deepEqual((await folder.restoresMarked()).get('cccc0001'), '');
  await backups.settleRestores(() => true);
  t.deepEqual(settled, ['cccc0001']);
  t.deepEqual([...(await folder.restoresMarked()).keys()], []);
});

test("a restore this agent has under way is never settled by it, though its folder marks it; a failed scratch keeps its mark for the next agent", async (t) => {
  const { folder, settled, scratchTags, releaseScratch, backups } = made(t, []);
  const backup = await folder.write('bot_1_1_busy', ['/data'], async () => dataTar(), async () => ({ mode: 'live', downtime_ms: null }));
  const restoring = backups.restore('bot_1_1_busy', backup.id).catch((err: unknown) => err as Error);
  t.true(await eventually(async () => scratchTags.length === 1, 10_000, 10), 'the restore reached its scratch');
  t.true((await folder.restoresMarked()).has(scratchTags[0]!), 'marked before the runtime holds anything');
  await backups.settleRestores(() => true);
  t.deepEqual(settled, [], 'under way here: left alone');
  t.true((await folder.restoresMarked()).has(scratchTags[0]!));
  releaseScratch();
  t.regex(String(await restoring), /the engine went away/);
  t.true((await folder.restoresMarked()).has(scratchTags[0]!), 'what the runtime holds of it unknown: marked still');
});
