import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import { BackupFolder } from '../../src/backups/backup-folder.js';
import { Backups } from '../../src/backups/backups.js';
import { NotFound } from '../../src/errors.js';

// A backup in stop mode cut short (docs/api.md §20): the bot it stopped is marked on disk before the stop, so the
// next agent starts it; a bot started again by the backup itself is no longer marked.
function made(t: { teardown(fn: () => void): void }, start: (botId: string) => Promise<void>) {
  const root = mkdtempSync(join(tmpdir(), 'bot-agent-backups-stopped-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const calls: string[] = [];
  const folder = new BackupFolder(root);
  const archives = { folders: async () => ['/data'], read: async () => Readable.from([Buffer.from('x')]), usage: async () => [] };
  const power = {
    running: async () => true,
    stop: async (botId: string) => void calls.push(`stop ${botId}`),
    start: async (botId: string) => {
      calls.push(`start ${botId}`);
      await start(botId);
    },
  };
  return { folder, calls, backups: new Backups(archives, folder, power) };
}

test('a bot a backup stopped and started again is not marked; one whose start failed is, and the next agent starts it', async (t) => {
  let failing = false;
  const { folder, calls, backups } = made(t, async () => {
    if (failing) throw new Error('the engine went away');
  });
  await backups.take('bot_1_1_a', { mode: 'stop' });
  t.deepEqual(calls, ['stop bot_1_1_a', 'start bot_1_1_a']);
  t.deepEqual(await folder.stoppedForBackups(), []);
  failing = true;
  await t.throwsAsync(backups.take('bot_1_1_a', { mode: 'stop' }), { message: 'the engine went away' });
  t.deepEqual(await folder.stoppedForBackups(), ['bot_1_1_a'], 'left stopped: marked');
  failing = false;
  // The next agent, sharing the folder.
  const next = new Backups({ folders: async () => [], read: async () => Readable.from([]), usage: async () => [] }, folder, {
    running: async () => false,
    stop: async () => undefined,
    start: async (botId) => void calls.push(`started again ${botId}`),
  });
  t.deepEqual(await next.startStopped((botId) => botId !== 'bot_9_9_other'), { started: ['bot_1_1_a'], failures: [] });
  t.is(calls.at(-1), 'started again bot_1_1_a');
  t.deepEqual(await folder.stoppedForBackups(), []);
});

test('a marked bot removed since is unmarked; one another agent cares for is left; a start that fails stays marked', async (t) => {
  const { folder, backups } = made(t, async (botId) => {
    if (botId === 'bot_1_1_gone') throw new NotFound('container not found');
    if (botId === 'bot_1_1_stuck') throw new Error('the engine went away');
  });
  for (const botId of ['bot_1_1_gone', 'bot_1_1_stuck', 'bot_1_1_other']) await folder.markStopped(botId);
  const { started, failures } = await backups.startStopped((botId) => botId !== 'bot_1_1_other');
  t.deepEqual(started, []);
  t.is(failures.length, 1);
  t.regex(failures[0] ?? '', /bot_1_1_stuck: the engine went away/);
  t.deepEqual((await folder.stoppedForBackups()).sort(), ['bot_1_1_other', 'bot_1_1_stuck']);
});
