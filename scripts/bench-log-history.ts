// The log history's store at scale (docs/api.md §21; npm run bench:log-history, part of npm run bench), on this
// machine's disk, without the runtime: (1) 1,000 bots writing 10 lines a second each for 30 s, the store's CPU and
// memory for it; (2) the bytes it keeps per line against the lines' text; (3) one bot's 7 days, 100 MB of text,
// searched for a rare word and a regular expression, p95 of 20 each; (4) every bot's last stretch (1,000 bots, a
// minute each at 10 lines a second) searched at once for a word, p95 of 10. What it leaves out: the runtime's own
// cost of following 1,000 bots' output (the engine's log streams), which no store can lower.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { lineMatcher } from '../src/log-history/line-match.js';
import { LogStore } from '../src/log-history/log-store.js';
import type { HistorySearch } from '../src/log-history/log-store.js';
import { writeSection } from './bench-sections.js';

const BOTS = 1_000;
const LINES_A_SECOND = 10;
/** The every-bot search's hour: a line from each bot this often (3,600,000 lines in all at 1 s). */
const HOUR_LINE_EVERY_S = 1;
const INGEST_S = 30;
const report = (what: string, err: unknown) => console.error(what, err);
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const ms = (value: number) => `${value.toFixed(value < 10 ? 1 : 0)} ms`;
const p95 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.95) - 1] ?? NaN;

let counter = 0;
/** A line as bots write them: a level, what happened, ids and a time taken, no two alike. */
function lineText(botId: string): string {
  counter += 1;
  const levels = ['INFO', 'INFO', 'INFO', 'DEBUG', 'WARN'];
  return `${levels[counter % levels.length]} [${botId}] handled update ${100_000 + ((counter * 7919) % 900_000)} from chat ${(counter * 104_729) % 10_000_000} in ${counter % 97} ms`;
}

const search = (over: Partial<HistorySearch>): HistorySearch => ({
  order: 'newest',
  limit: 100,
  maxBytes: 4 * 1024 * 1024,
  lineBytes: (line) => line.text.length + 60,
  budgetMs: Infinity,
  ...over,
});

const dirs: string[] = [];
function freshStore(): LogStore {
  const dir = mkdtempSync(join(tmpdir(), 'bench-log-history-'));
  dirs.push(dir);
  return new LogStore(dir, report);
}

const figures: string[] = [];
try {
  // (1) and (2): ingestion as the collector hands lines over, the store writing once a second.
  const ingest = freshStore();
  ingest.start();
  global.gc?.();
  const restRss = process.memoryUsage().rss;
  const botIds = Array.from({ length: BOTS }, (_, i) => `bot_${i}_1_bench`);
  const cpuBefore = process.cpuUsage();
  const began = performance.now();
  let peakRss = restRss;
  for (let second = 0; second < INGEST_S; second += 1) {
    const secondStart = performance.now();
    // Each bot's 10 lines, spread over the second in 10 rounds, as the runtime's streams bring them.
    for (let round = 0; round < LINES_A_SECOND; round += 1) {
      const at = Date.now();
      for (const botId of botIds) ingest.append(botId, [{ at, run: at - 60_000, stream: 'stdout', text: lineText(botId) }]);
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      await sleep(Math.max(0, secondStart + ((round + 1) * 1_000) / LINES_A_SECOND - performance.now()));
    }
  }
  const cpu = process.cpuUsage(cpuBefore);
  const cpuShare = (cpu.user + cpu.system) / 1_000 / (performance.now() - began);
  // Everything packed, as five minutes on would have it.
  await ingest.flush(Date.now() + 10 * 60_000);
  const packed = ingest.packedSize();
  figures.push(
    `- Ingestion, ${BOTS.toLocaleString('en')} bots writing ${LINES_A_SECOND} lines a second each for ${INGEST_S} s (${(BOTS * LINES_A_SECOND).toLocaleString('en')} lines a second, the store's writes once a second in one transaction): **${(cpuShare * 100).toFixed(1)} % of a core**, RSS at most **${mib(peakRss - restRss)} MiB above rest** (goal: under 10 % and 64 MB; the runtime's own log streams not counted).`,
    `- Bytes kept per line: **${(packed.bytes / packed.lines).toFixed(1)} B** against ${(packed.rawBytes / packed.lines).toFixed(1)} B of text, **${((packed.bytes / packed.rawBytes) * 100).toFixed(1)} %** (goal: at most 20 %), over ${packed.lines.toLocaleString('en')} lines in zstd chunks.`,
  );
  console.log(figures.join('\n'));

  // (3): one bot's 7 days, 100 MB of text, then searches of all of it.
  const week = freshStore();
  const weekMs = 7 * 86_400_000;
  const start = Date.now() - weekMs;
  let textBytes = 0;
  let written = 0;
  const needles: number[] = [];
  const buildStart = performance.now();
  while (textBytes < 100 * 1024 * 1024) {
    for (let i = 0; i < 20_000; i += 1) {
      const text = written % 20_011 === 0 ? `ERROR needle ${written} 429 Too Many Requests` : lineText('bot_week');
      if (text.startsWith('ERROR')) needles.push(written);
      week.append('bot_week', [{ at: start + Math.floor((written * weekMs) / 1_150_000), run: start, stream: 'stdout', text }]);
      textBytes += text.length + 1;
      written += 1;
    }
    await week.flush(Date.now());
  }
  console.log(`7 days of one bot: ${written.toLocaleString('en')} lines, ${mib(textBytes)} MiB of text, written and packed in ${ms(performance.now() - buildStart)}`);
  const timedSearch = async (store: LogStore, run: () => Promise<unknown>): Promise<number> => {
    const t0 = performance.now();
    await run();
    return performance.now() - t0;
  };
  const rare: number[] = [];
  const regex: number[] = [];
  const match = lineMatcher('needle', undefined);
  const regexMatch = lineMatcher(undefined, 'needle \\d+ 429 Too (Many|Few)');
  let found = 0;
  for (let i = 0; i < 20; i += 1) {
    rare.push(
      await timedSearch(week, async () => {
        found = (await week.search('bot_week', search({ match, mustContain: 'needle' }))).lines.length;
      }),
    );
    regex.push(await timedSearch(week, () => week.search('bot_week', search({ match: regexMatch }))));
  }
  figures.push(
    `- One bot's 7 days (${written.toLocaleString('en')} lines, ${mib(textBytes)} MiB of text): a search of all of it for a rare word (${found} lines found) **p95 ${ms(p95(rare))}**; for an RE2 regular expression **p95 ${ms(p95(regex))}** (goal: under 500 ms).`,
  );
  console.log(figures.at(-1));

  // (4): every bot's last stretch, searched at once.
  const fleet = freshStore();
  const now = Date.now();
  for (let second = 3_600; second > 0; second -= HOUR_LINE_EVERY_S) {
    for (const botId of botIds) {
      const text = counter % 9_973 === 0 ? `WARN ${botId} 429 Too Many Requests` : lineText(botId);
      fleet.append(botId, [{ at: now - second * 1_000, run: now - 3_600_000, stream: 'stdout', text }]);
    }
    if (second % 60 === 0) await fleet.flush(now);
  }
  await fleet.flush(now + 10 * 60_000);
  for (const botId of botIds) fleet.noteBot(botId, 'user_bench');
  const hour: number[] = [];
  let fleetFound = 0;
  const wordMatch = lineMatcher('429 Too Many', undefined);
  for (let i = 0; i < 10; i += 1) {
    const t0 = performance.now();
    fleetFound = (await fleet.searchBots(fleet.knownBots('user_bench'), search({ since: now - 3_600_000, match: wordMatch, mustContain: '429 Too Many' }))).lines.length;
    hour.push(performance.now() - t0);
  }
  figures.push(
    `- Every bot's last hour (${BOTS.toLocaleString('en')} bots, a line every ${HOUR_LINE_EVERY_S} s each: ${((BOTS * 3_600) / HOUR_LINE_EVERY_S).toLocaleString('en')} lines), searched at once for a word (${fleetFound} lines answered, the first 100): **p95 ${ms(p95(hour))}** (goal: under 2 s).`,
  );
  console.log(figures.at(-1));
  await Promise.all([ingest.close(), week.close(), fleet.close()]);
  const unmet = [
    cpuShare >= 0.1 ? 'the ingestion\'s CPU' : '',
    (peakRss - restRss) / 1e6 >= 64 ? 'the ingestion\'s memory' : '',
    packed.bytes / packed.rawBytes > 0.2 ? 'the bytes per line' : '',
    p95(rare) >= 500 ? "the 7 days' search for a word" : '',
    p95(regex) >= 500 ? "the 7 days' search for a regular expression" : '',
    p95(hour) >= 2_000 ? 'the search of every bot' : '',
  ].filter(Boolean);
  figures.push(
    unmet.length === 0 ? '- Every goal met in this run.' : `- **Not met in this run: ${unmet.join('; ')}.**`,
  );
  writeSection(
    'log-history',
    `## The log history's store (npm run bench:log-history)\n\nThe store of docs/api.md §21 on this machine's disk, fed and searched directly (scripts/bench-log-history.ts).\n\n${figures.join('\n')}`,
  );
} finally {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
