import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import test from 'ava';
import { asPlatform, TEST_ADMIN_TOKEN } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// The TypeScript and Python command lines deploy and roll back a bot (docs/api.md §15), as the platform does
// with its admin token (loopback is no platform here), against the agent on the real engine.
const run = promisify(execFile);
const fixture = new DockerFixture();
let agent: ProvisioningAgent;

test.before(async () => {
  await fixture.ready();
  agent = await provisioningAgent(fixture, 'address', { config: { loopbackPlatform: false } });
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

const CLIS = {
  typescript: [process.execPath, '--import=tsx', 'clients/typescript/src/cli.ts'],
  python: ['python3', '-m', 'bot_agent'],
} as const;

for (const [language, [program, ...first]] of Object.entries(CLIS)) {
  test(`the ${language} command line deploys (waiting for the verdict), lists the revisions and rolls back; a failed deploy exits 1`, async (t) => {
    const id = await createdIdleBot(t, fixture, agent.server, {}, asPlatform);
    const env = {
      ...process.env,
      BOT_ID: id,
      PLATFORM_AGENT_URL: `http://127.0.0.1:${(agent.server.address() as AddressInfo).port}`,
      BOT_AGENT_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      PYTHONPATH: 'clients/python/src',
    };
    const cli = (...args: string[]) => run(program, [...first, ...args], { env, timeout: 60_000 }).catch((err: { code: number; stdout: string; stderr: string }) => err);
    const good = await cli('deploy', '--env', 'MODE=two', '--min-ready', '1', '--wait');
    t.is((good as { code?: number }).code ?? 0, 0, `${good.stdout}${good.stderr}`);
    t.regex(good.stdout, /^bot-agent: revision 2 started\n/);
    t.like(JSON.parse(good.stdout.slice(good.stdout.indexOf('{'))), { revision: 2, outcome: 'succeeded' });
    t.true((await fixture.docker.getContainer(id).inspect()).Config.Env?.includes('MODE=two'));
    const listed = JSON.parse((await cli('revisions')).stdout) as { revision: number; outcome: string }[];
    t.deepEqual(listed.map((r) => r.revision), [2, 1]);
    t.is(listed[0]?.outcome, 'succeeded');
    // Revision 1 is judged for 10 s from the create, unless a deploy comes first (docs/api.md §15).
    t.true(['interrupted', 'succeeded'].includes(listed[1]?.outcome ?? ''), listed[1]?.outcome);
    const back = await cli('rollback');
    t.is(back.stdout, 'bot-agent: revision 1 runs again\n');
    t.false((await fixture.docker.getContainer(id).inspect()).Config.Env?.includes('MODE=two'));
    // A registry nobody answers on, on loopback: the deploy fails before anything stops.
    const bad = await cli('deploy', '--image', '127.0.0.1:9/tests/nowhere:v1', '--wait');
    t.is((bad as { code?: number }).code, 1);
    t.regex(bad.stderr, /^bot-agent: /);
    const usage = await cli('deploy', '--env', 'no-equals');
    t.is((usage as { code?: number }).code, 2);
    // Without the admin token, from a host that is no platform: refused.
    const stranger = await run(program, [...first, 'rollback'], { env: { ...env, BOT_AGENT_ADMIN_TOKEN: '' } }).catch((err: { code: number; stderr: string }) => err);
    t.is((stranger as { code?: number }).code, 1);
    t.regex((stranger as { stderr: string }).stderr, /forbidden/);
  });
}

// The operator's command line (docs/clients.md): no BOT_ID, the bot named by --bot, the agent's address and admin
// token from the environment; the list, the nodes, a move refused, and each bot command on the real container.
for (const [language, [program, ...first]] of Object.entries(CLIS)) {
  test(`the ${language} command line is the operator's with --bot: list, status, logs, stop, start, restart, revisions, nodes, a move refused`, async (t) => {
    const id = await createdIdleBot(t, fixture, agent.server, {}, asPlatform);
    const env: Record<string, string | undefined> = {
      ...process.env,
      BOT_AGENT_URL: `http://127.0.0.1:${(agent.server.address() as AddressInfo).port}`,
      BOT_AGENT_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      PYTHONPATH: 'clients/python/src',
    };
    delete env.BOT_ID;
    delete env.USER_ID;
    delete env.PLATFORM_AGENT_URL;
    const cli = (...args: string[]) => run(program, [...first, ...args], { env, timeout: 60_000 }).catch((err: { code: number; stdout: string; stderr: string }) => err);
    const ok = async (...args: string[]) => {
      const done = await cli(...args);
      t.is((done as { code?: number }).code ?? 0, 0, `${args.join(' ')}: ${done.stdout}${done.stderr}`);
      return done.stdout;
    };
    const help = await ok('--help');
    t.regex(help, /^usage: bot-agent \[--bot <bot_id>\] <command>|^bot-agent \[--bot <bot_id>\] <command>/);
    const listed = JSON.parse(await ok('list', '--limit', '1000')) as { total: number; bots: { bot_id: string }[] };
    t.true(listed.bots.some((bot) => bot.bot_id === id), JSON.stringify(listed));
    t.true(listed.total >= 1);
    t.like(JSON.parse(await ok('status', '--bot', id)), { bot_id: id, state: 'running' });
    const container = fixture.docker.getContainer(id);
    t.regex(await ok('stop', '--bot', id), new RegExp(id));
    t.false((await container.inspect()).State.Running, 'stopped');
    t.regex(await ok('start', '--bot', id), new RegExp(id));
    t.true((await container.inspect()).State.Running, 'started');
    const before = (await container.inspect()).State.StartedAt;
    t.regex(await ok('restart', '--bot', id), new RegExp(id));
    t.not((await container.inspect()).State.StartedAt, before, 'restarted');
    t.deepEqual((JSON.parse(await ok('revisions', '--bot', id)) as { revision: number }[]).map((one) => one.revision), [1]);
    await ok('logs', '--bot', id, '5');
    t.true(Array.isArray((JSON.parse(await ok('nodes')) as { nodes: unknown[] }).nodes));
    const move = await cli('move', 'node-nowhere', '--bot', id);
    t.is((move as { code?: number }).code, 1, `${move.stdout}${move.stderr}`);
    t.regex(move.stderr, /^bot-agent: /);
    t.is(((await cli('move', 'node-b')) as { code?: number }).code, 2, 'a move names its bot');
    // Without the admin token, from a host that is no platform: refused.
    const stranger = await run(program, [...first, 'list'], { env: { ...env, BOT_AGENT_ADMIN_TOKEN: '' } }).catch((err: { code: number; stderr: string }) => err);
    t.is((stranger as { code?: number }).code, 1);
    t.regex((stranger as { stderr: string }).stderr, /forbidden/);
  });
}
