import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { LogCollectorOptions } from '../../src/log-history/log-collector.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// The log history on the real engine (docs/api.md §21): a bot's output kept across a crash, a restart, a deploy and
// the agent's own restart, searched by text, regex, stream and time, paged, its secrets masked; a flooding bot's
// gap said while a quiet one's lines all arrive; gone with the bot's removal; bad queries are 400s naming the field.
const fixture = new DockerFixture();
const LOG_HISTORY: LogCollectorOptions = { ratePerSecond: 50, retention: { days: 7, botBytes: 100_000_000, totalBytes: 1_000_000_000 } };
const TOKEN = 'tok-history-0123456789';
let dataDir: string;
let agent: ProvisioningAgent;

const startAgent = () => provisioningAgent(fixture, 'address', { config: { dataDir, logHistory: LOG_HISTORY } });

test.before(async () => {
  await fixture.ready();
  dataDir = await mkdtemp(join(tmpdir(), 'log-history-'));
  agent = await startAgent();
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
  await rm(dataDir, { recursive: true, force: true });
});

interface Line {
  at: string;
  run: string | null;
  stream: string;
  line: string;
}

async function history(botId: string, query: Record<string, string> = {}): Promise<{ status: number; lines: Line[]; next: string | null; body: Record<string, unknown> | undefined }> {
  const reply = await call(agent.server, `/api/bots/${botId}/logs/history?${new URLSearchParams(query)}`);
  return { status: reply.status, lines: (reply.body?.lines ?? []) as Line[], next: (reply.body?.next ?? null) as string | null, body: reply.body };
}

/** Waits until the search finds `count` lines; answers them. */
async function found(t: ExecutionContext, botId: string, query: Record<string, string>, count: number): Promise<Line[]> {
  let lines: Line[] = [];
  await eventually(async () => (lines = (await history(botId, { ...query, limit: '1000' })).lines).length >= count, 30_000, 250);
  t.is(lines.length, count, `${JSON.stringify(query)}: ${JSON.stringify(lines.map((line) => line.line))}`);
  return lines;
}

// Each run says its own name; the first run of the first container crashes.
const SCRIPT = [
  'echo "run-begins $(cat /proc/sys/kernel/random/uuid) mode=$MODE"',
  'echo "my token is $BOT_TOKEN and $PLATFORM_AGENT_TOKEN"',
  'echo "429 Too Many Requests" >&2',
  'if [ "$MODE" = one ] && [ ! -e /tmp/crashed ]; then touch /tmp/crashed; echo crashing; exit 3; fi',
  "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done",
].join('; ');

test.serial("a bot's output is kept across a crash, a restart, a deploy and the agent's restart, once each, searchable, its secrets masked", async (t) => {
  const botId = await createdIdleBot(t, fixture, agent.server, { token: TOKEN, env: { MODE: 'one' }, command: ['sh', '-c', SCRIPT] });
  // The crash; the bot is started again.
  await found(t, botId, { q: 'crashing' }, 1);
  await eventually(async () => !(await fixture.docker.getContainer(botId).inspect()).State.Running, 15_000, 200);
  const started = await call(agent.server, '/api/bots/start', { body: { bot_id: botId, user_id: 'user_9' } });
  t.true(started.status === 200, started.text);
  await found(t, botId, { q: 'run-begins' }, 2);
  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: botId, user_id: 'user_9' } })).status, 200);
  await found(t, botId, { q: 'run-begins' }, 3);
  const deployed = await call(agent.server, `/api/admin/bots/${botId}`, { method: 'PATCH', body: { env: { MODE: 'two' }, min_ready_s: 1, deadline_s: 60 } });
  t.is(deployed.status, 202, deployed.text);
  await found(t, botId, { q: 'run-begins' }, 4);
  // The agent's own restart: what it kept is still there, and nothing is kept twice.
  await agent.close();
  agent = await startAgent();
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  await found(t, botId, { q: 'run-begins' }, 4);
  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: botId, user_id: 'user_9' } })).status, 200);
  const runs = await found(t, botId, { q: 'run-begins', order: 'oldest' }, 5);
  t.is(new Set(runs.map((line) => line.line)).size, 5, 'each run once');
  t.is(new Set(runs.map((line) => line.run)).size, 5, 'each line names its own run');
  t.deepEqual(runs.map((line) => line.at), runs.map((line) => line.at).sort(), 'oldest first');
  // A run's first line may be stamped a moment before the start the engine records (docs/api.md §21).
  t.true(runs.every((line) => line.run !== null && Date.parse(line.run) - 100 <= Date.parse(line.at)), JSON.stringify(runs));
  t.is((await found(t, botId, { q: 'crashing' }, 1))[0]?.run, runs[0]?.run);
  // Masked: the token never stored, nor answered.
  const masked = await found(t, botId, { q: 'my token is' }, 5);
  t.true(masked.every((line) => line.line === 'my token is *** and ***'), JSON.stringify(masked));
  await found(t, botId, { q: TOKEN }, 0);
  for (const file of (await readdir(dataDir)).filter((name) => name.startsWith('log-history'))) {
    t.false((await readFile(join(dataDir, file))).includes(TOKEN), `${file} holds the token`);
  }
  // By stream and regex (RE2), by run, by time.
  await found(t, botId, { stream: 'stderr', regex: '^429 Too (Many|Few) Requests$' }, 5);
  await found(t, botId, { stream: 'stdout', q: '429 Too Many' }, 0);
  await found(t, botId, { run: runs[2]!.run! }, 3);
  await found(t, botId, { q: 'run-begins', since: runs[1]!.at, until: runs[3]!.at }, 2);
  // Paged, two at a time, newest first: every line once.
  const paged: Line[] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<typeof history>> = await history(botId, { q: 'run-begins', limit: '2', ...(cursor ? { cursor } : {}) });
    paged.push(...page.lines);
    cursor = page.next;
  } while (cursor !== null);
  t.deepEqual(paged.map((line) => line.line), runs.map((line) => line.line).reverse());
});

test.serial("a flooding bot's lines past its share are said as a gap, while a quiet bot's lines all arrive", async (t) => {
  const flood = await createdIdleBot(t, fixture, agent.server, { command: ['sh', '-c', 'i=0; while :; do echo "flood $i"; i=$((i+1)); done'] });
  const quiet = await createdIdleBot(t, fixture, agent.server, { command: ['sh', '-c', 'i=0; while [ $i -lt 40 ]; do echo "quiet $i"; i=$((i+1)); sleep 0.1; done; sleep 3600'] });
  const quietLines = await found(t, quiet, { q: 'quiet', order: 'oldest' }, 40);
  t.deepEqual(quietLines.map((line) => line.line), Array.from({ length: 40 }, (_, i) => `quiet ${i}`));
  let gaps: Line[] = [];
  await eventually(async () => (gaps = (await history(flood, { stream: 'agent' })).lines).length > 0, 20_000, 250);
  t.regex(gaps[0]?.line ?? '', /^\[bot-agent\] \d+ lines written from \S+ to \S+ not kept: past the bot's share of 50 lines a second \(AGENT_LOG_HISTORY_RATE\)$/);
  t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: flood, user_id: 'user_9' } })).status, 200);
});

test.serial("a removed bot's history goes with it; a new bot of its id begins with none", async (t) => {
  const botId = await createdIdleBot(t, fixture, agent.server, { command: ['sh', '-c', 'echo "before removal"; sleep 3600'] });
  await found(t, botId, { q: 'before removal' }, 1);
  t.is((await call(agent.server, `/api/admin/bots/${botId}`, { method: 'DELETE' })).status, 200);
  t.is((await history(botId)).status, 404);
  const again = await call(agent.server, '/api/admin/bots', { body: { bot_id: botId, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: TOKEN, command: ['sh', '-c', 'echo "after"; sleep 3600'] } });
  t.is(again.status, 201, again.text);
  await found(t, botId, { q: 'after' }, 1);
  await found(t, botId, { q: 'before removal' }, 0);
});

test('bad searches are 400s that name their parameter', async (t) => {
  const botId = await createdIdleBot(t, fixture, agent.server);
  for (const [query, named] of [
    [{ regex: '(' }, /^regex is not a valid regular expression/],
    [{ regex: 'x'.repeat(513) }, /^regex must be at most 512 characters/],
    [{ since: '2026-12-02T00:00:00Z', until: '2026-12-01T00:00:00Z' }, /^since must be before until/],
    [{ since: 'yesterday' }, /^since must be a time/],
    [{ limit: '0' }, /^limit/],
    [{ limit: '1001' }, /^limit/],
    [{ cursor: 'abc' }, /^cursor must be/],
    [{ stream: 'both' }, /^stream must be/],
    [{ order: 'random' }, /^order must be/],
  ] as const) {
    const reply = await history(botId, query);
    t.is(reply.status, 400, JSON.stringify(query));
    t.regex(String(reply.body?.msg), named);
    t.is(reply.body?.ok, false);
  }
});
