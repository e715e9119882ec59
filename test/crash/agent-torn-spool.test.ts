import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import { DAMAGED_FILE, SPOOL_FILE } from '../../src/history/history-spool.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { eventually } from '../helpers/eventually.js';

// The agent as operators run it, started on the spool a SIGKILL left (docs/api.md §11): two whole writes and half
// of a third. It used to exit 1 at every start ("Unterminated string in JSON") until someone deleted the file.
test('an agent started on a spool whose last line was cut off serves, writes every whole line, and sets the cut one aside, counted', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-torn-'));
  const operation = (result: string, atMs: number) =>
    JSON.stringify({ kind: 'operation', botId: 'bot_1_1_torn', operation: 'restart', result, by: 'platform', atMs });
  const cut = operation('third', Date.now()).slice(0, 60);
  writeFileSync(join(dataDir, SPOOL_FILE), `${operation('first', Date.now() - 2_000)}\n${operation('second', Date.now() - 1_000)}\n${cut}`);
  const agent = await runAgentProcess({ AGENT_DATA_DIR: dataDir });
  t.teardown(() => agent.process.kill('SIGKILL'));
  const metrics = async () => (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text();
  t.true(await eventually(async () => /^bot_agent_history_spool_writes 0$/m.test(await metrics()), 10_000, 100), 'the spool was not written');
  t.regex(await metrics(), /^bot_agent_history_spool_damaged_lines_total 1$/m);
  t.is((await fetch(`http://127.0.0.1:${agent.port}/readyz`)).status, 200);
  const db = new DatabaseSync(join(dataDir, 'history.sqlite'), { readOnly: true });
  const results = db
    .prepare("SELECT data FROM events WHERE bot_id = 'bot_1_1_torn' AND type = 'operation' ORDER BY seq")
    .all()
    .map((row) => (JSON.parse(row.data as string) as { result: string }).result);
  db.close();
  t.deepEqual(results, ['first', 'second']);
  t.is(readFileSync(join(dataDir, DAMAGED_FILE), 'utf8'), `${cut}\n`);
  t.false(existsSync(join(dataDir, SPOOL_FILE)), 'what was written is not left to write again');
  t.regex(agent.output(), /damaged line/);
});
