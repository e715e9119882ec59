import { spawn } from 'node:child_process';
import test from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import { listen } from '../../src/http/listen.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';

// /metrics judged by Prometheus' own checker (docs/operating.md): `promtool check metrics`, built by
// scripts/promtool.sh, which npm test runs and names in BOT_AGENT_PROMTOOL.
const PROMTOOL = process.env.BOT_AGENT_PROMTOOL;

/** What `promtool check metrics` says of `text`: its exit code and its words. A crash of its own fails the test. */
function checked(text: string): Promise<{ code: number | null; said: string }> {
  if (PROMTOOL === undefined) throw new Error('BOT_AGENT_PROMTOOL is not set: run the tests with npm test, which builds promtool (scripts/promtool.sh)');
  return new Promise((resolve, reject) => {
    const child = spawn(PROMTOOL, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let said = '';
    child.stdout.on('data', (chunk: Buffer) => (said += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (said += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, said }));
    child.stdin.end(text);
  });
}

test("promtool judges: a gauge named as a counter, and a counter without _total, are its findings", async (t) => {
  const bad = ['# HELP a_total A gauge.', '# TYPE a_total gauge', 'a_total 1', '# HELP b_requests A counter.', '# TYPE b_requests counter', 'b_requests 1', ''].join('\n');
  const { code, said } = await checked(bad);
  // 3: the text was read and has lint findings; 1 would be its own failure to read it.
  t.is(code, 3, said);
  t.regex(said, /a_total non-counter metrics should not have "_total" suffix/);
  t.regex(said, /b_requests counter metrics should have "_total" suffix/);
});

test("the agent's /metrics after requests, a lifecycle operation and a bot not found passes promtool check metrics, with nothing said", async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: 'bot_1_1_a', address: '127.0.0.7', logLines: ['hello'] });
  const { app } = assembleAgent({ driver, config: TEST_APP_CONFIG, logger: pino({ level: 'silent' }) });
  const server = await listen(app, '127.0.0.1', 0);
  t.teardown(() => server.close());
  await call(server, '/api/bots/restart', { body: { bot_id: 'bot_1_1_a', user_id: 'user_1' } });
  await call(server, '/api/bots/bot_1_1_a/stats');
  await call(server, '/api/bots/bot_1_1_z/stats');
  const metrics = await call(server, '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.text, /bot_agent_lifecycle_operations_total/);
  const { code, said } = await checked(metrics.text);
  t.is(code, 0, said);
  t.is(said.trim(), '');
});
