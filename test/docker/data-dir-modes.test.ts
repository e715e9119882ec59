import { chmodSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { HistorySpool } from '../../src/history/history-spool.js';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { runAgentProcess } from '../helpers/agent-process.js';

// AGENT_DATA_DIR holds bot log lines (exit records, the spool), session nonces and signing keys: the folder is
// its owner's alone (0700) and so is every file in it (0600), whatever the umask (docs/operating.md).

/** Each entry of `dir` (the folder itself as '.') with its permission bits, as `ls -l` would show them in octal. */
function modes(dir: string): Record<string, string> {
  const entries: Record<string, string> = { '.': (statSync(dir).mode & 0o777).toString(8) };
  for (const name of readdirSync(dir)) entries[name] = (statSync(join(dir, name)).mode & 0o777).toString(8);
  return entries;
}

function onlyOwner(t: import('ava').ExecutionContext, dir: string): void {
  const found = modes(dir);
  t.true(Object.keys(found).length > 2, `nothing was written: ${JSON.stringify(found)}`);
  // Folders (the data folder, its deploys' marks) 700, files 600.
  for (const [name, mode] of Object.entries(found)) t.is(mode, name === '.' || statSync(join(dir, name)).isDirectory() ? '700' : '600', `${name} is ${mode}`);
}

test("the history's file, its journals, the spool and the keys are made as their owner's alone under a umask of 022", async (t) => {
  const previous = process.umask(0o022);
  t.teardown(() => process.umask(previous));
  const dir = join(mkdtempSync(join(tmpdir(), 'bot-agent-modes-')), 'data');
  const store = new SqliteHistoryStore(dir);
  await store.addExit('bot_1_1_modes', { at: new Date().toISOString(), exit_code: 1, signal: null, oom_killed: false, requested: false, started_at: null, unhealthy: null, logs: 'a secret log line' }, 'run-1');
  const spool = new HistorySpool<{ n: number }>(dir, 1_000_000);
  spool.add({ n: 1 });
  spool.add({ n: 2 });
  spool.shift();
  BotTokens.open(dir);
  onlyOwner(t, dir);
  await store.close();
});

test('the agent narrows a data folder an earlier version left readable to all, and the files in it, as it starts', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bot-agent-modes-'));
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  for (const name of ['history-spool.jsonl', 'history-spool.done']) writeFileSync(join(dir, name), '', { mode: 0o644 });
  // A history file of an earlier start, made as that version made it.
  await new SqliteHistoryStore(dir).close();
  chmodSync(join(dir, 'history.sqlite'), 0o644);
  const agent = await runAgentProcess({ AGENT_DATA_DIR: dir, AGENT_IDENTITY: 'token' });
  t.teardown(() => agent.process.kill('SIGKILL'));
  onlyOwner(t, dir);
});
