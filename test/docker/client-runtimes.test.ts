import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import test from 'ava';
import { asPlatform } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// The TypeScript client (clients/typescript) as a bot installs it, inside real bot containers on the real
// engine, on each runtime a bot may bring: Node 18, 20, 22 and the project's 24, Bun and Deno. Each bot is made by
// the agent (its token in PLATFORM_AGENT_TOKEN, address+token identity) and calls it through the client.
const run = promisify(execFile);
const fixture = new DockerFixture();
const RUNTIMES: ReadonlyArray<{ runtime: 'node' | 'bun' | 'deno'; version: string; command: string }> = [
  { runtime: 'node', version: '18.20.8', command: 'node check.mjs' },
  { runtime: 'node', version: '20.20.2', command: 'node check.mjs' },
  { runtime: 'node', version: '22.23.3', command: 'node check.mjs' },
  { runtime: 'node', version: readFileSync('.node-version', 'utf8').trim(), command: 'node check.mjs' },
  { runtime: 'bun', version: '1.4.5', command: 'bun check.mjs' },
  { runtime: 'deno', version: '2.9.6', command: 'deno run --allow-all check.mjs' },
];
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address+token');
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

for (const { runtime, version, command } of RUNTIMES) {
  test(`the client on ${runtime} ${version}, installed as a bot installs it, does everything but the lifecycle against the real agent`, async (t) => {
    const { stdout } = await run('bash', ['scripts/client-bot-image.sh', runtime, version], { maxBuffer: 16 * 1024 * 1024 });
    const image = stdout.trim().split('\n').at(-1) ?? '';
    const id = fixture.newBotId();
    const container = fixture.docker.getContainer(id);
    t.teardown(() => container.remove({ force: true }).catch(() => undefined));
    const created = await call(agent.server, '/api/admin/bots', {
      headers: asPlatform,
      body: { bot_id: id, user_id: 'user_js', image, template: 'discord', token: 'discord-secret-0123456789', command: ['sh', '-c', 'echo first line; echo second line; sleep 2147483647 & wait'] },
    });
    t.is(created.status, 201, created.text);
    const bot = { id, container };
    t.true(await eventually(() => fixture.running(bot), 30_000, 100), 'the bot never ran');
    const output = await fixture.exec(bot, `cd /app && ${command} 2>&1`, { BOT_AGENT_PROBE: `${agent.target.host}:${agent.target.port}` });
    const last = output.trim().split('\n').at(-1) ?? '';
    let report: Record<string, unknown>;
    try {
      report = JSON.parse(last) as Record<string, unknown>;
    } catch {
      t.fail(`no report from ${runtime} ${version}:\n${output}`);
      return;
    }
    t.log(`${String(report.runtime)}: ${Object.keys(report).join(', ')}`);
    t.regex(String(report.runtime), new RegExp(`^${runtime} v?${version.replace(/\./g, '\\.')}`));
    t.is(report.logs, 'first line\nsecond line\n');
    t.like(report.stats, { uptime: String((report.stats as { uptime?: unknown }).uptime) });
    t.is(typeof (report.stats as { cpu_percent?: unknown }).cpu_percent, 'number');
    t.like(report.status, { bot_id: id, user_id: 'user_js', state: 'running', health: { status: 'healthy', check: 'heartbeat' } });
    t.regex(String(report.heartbeat), new RegExp(`Heartbeat of bot ${id} taken`));
    t.deepEqual(report.exits, []);
    t.deepEqual(
      (report.followed as { type: string; line: string }[]).map((item) => [item.type, item.line]),
      [
        ['log', 'first line'],
        ['log', 'second line'],
      ],
    );
    t.true(Array.isArray(report.events));
    t.deepEqual(report.refusal, { isBotAgentError: true, status: 400, msg: (report.refusal as { msg?: string }).msg });
    t.regex(String((report.refusal as { msg?: string }).msg), /limit/);
  });
}
