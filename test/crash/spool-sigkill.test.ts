import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import { SPOOL_FILE } from '../../src/history/history-spool.js';

// The history's spool against the power cut it exists for (docs/api.md §11): 100 rounds of an agent's history, its
// store coming and going every few milliseconds, each round SIGKILLed at a random moment (and, now and then, by
// itself right after the store committed a write from the spool, before the spool counted it); every tenth round
// starts on a spool whose last line was cut in half. Then one clean start writes what waits: every write that was
// answered is kept once, none twice, with one webhook delivery each. On a slow machine the spool's replay falls behind
// and the bot's share of it fills: the writes it then refuses (counted as dropped, docs/api.md §11) are not answered,
// and must not be kept either.
const ROUNDS = 100;
const WRITER = join(import.meta.dirname, '..', 'helpers', 'spool-writer.ts');

interface Round {
  readonly acked: string[];
  readonly dropped: string[];
  readonly damaged: number;
  readonly signal: NodeJS.Signals | null;
  readonly ended: string;
}

function runWriter(dir: string, round: number, mode: 'write' | 'drain', killAfterMs?: number): Promise<Round> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import=tsx', WRITER, dir, String(round), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    // Killed a random time after it began writing (its first line on stderr says it has opened the spool).
    child.stderr.once('data', () => {
      if (killAfterMs !== undefined) setTimeout(() => child.kill('SIGKILL'), killAfterMs).unref();
    });
    const deadline = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(deadline);
      const damaged = /damaged (\d+)/.exec(err);
      if (!damaged) return reject(new Error(`the writer did not start (code ${code}, signal ${signal}): ${err}`));
      if (mode === 'drain' && !out.includes('drained')) return reject(new Error(`the spool was not written (code ${code}, signal ${signal}): ${err}`));
      // Only whole lines: a result half printed when the kill came was not answered.
      const lines = out.split('\n').slice(0, -1).filter((line) => line !== 'drained');
      const acked = lines.filter((line) => !line.startsWith('dropped '));
      const dropped = lines.filter((line) => line.startsWith('dropped ')).map((line) => line.slice('dropped '.length));
      resolve({ acked, dropped, damaged: Number(damaged[1]), signal, ended: `code ${code}, signal ${signal}: ${err.slice(-2000)}` });
    });
  });
}

test('the spool survives 100 SIGKILLs at random moments and torn last lines: every answered write is kept once, none is repeated', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bot-agent-spool-kills-'));
  const acked: string[] = [];
  const dropped: string[] = [];
  let tornRounds = 0;
  for (let round = 1; round <= ROUNDS; round += 1) {
    const torn = round % 10 === 0;
    if (torn) appendFileSync(join(dir, SPOOL_FILE), `{"n":${1e9 + round},"w":{"kind":"operation","botId":"bot_1_1_a","res`);
    const result = await runWriter(dir, round, 'write', 50 + Math.random() * 400);
    if (torn) {
      t.is(result.damaged, 1, `round ${round}: the cut-off line was not set aside`);
      tornRounds += 1;
    } else t.is(result.damaged, 0, `round ${round}: a whole line was taken for damage`);
    t.is(result.signal, 'SIGKILL', `round ${round}: the writer ended before the kill (${result.ended})`);
    acked.push(...result.acked);
    dropped.push(...result.dropped);
  }
  const drained = await runWriter(dir, ROUNDS + 1, 'drain');
  t.is(drained.damaged, 0);

  const db = new DatabaseSync(join(dir, 'history.sqlite'), { readOnly: true });
  const results = db
    .prepare("SELECT data FROM events WHERE bot_id = 'bot_1_1_a' AND type = 'operation'")
    .all()
    .map((row) => (JSON.parse(row.data as string) as { result: string }).result);
  const deliveries = db.prepare('SELECT data FROM deliveries').all().map((row) => (JSON.parse(row.data as string) as { result: string }).result);
  db.close();

  const kept = new Set(results);
  t.is(kept.size, results.length, `${results.length - kept.size} writes were kept twice`);
  const lost = acked.filter((result) => !kept.has(result));
  t.deepEqual(lost.slice(0, 10), [], `${lost.length} answered writes were lost`);
  t.deepEqual(dropped.filter((result) => kept.has(result)).slice(0, 10), [], 'a write the spool refused was kept all the same');
  t.is(new Set(deliveries).size, deliveries.length, 'a webhook delivery was queued twice');
  t.is(deliveries.length, results.length, 'every kept event has its delivery');
  t.log(`${acked.length} writes answered over ${ROUNDS} kills (${tornRounds} rounds on a torn spool), ${results.length} kept, ${dropped.length} refused by a full spool`);
  t.true(acked.length > ROUNDS, 'the rounds wrote too little to judge');
});
