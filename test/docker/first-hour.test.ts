import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { pythonBotImage } from '../helpers/python-bot.js';

// The first hour (README, docs/endpoints.md): the agent as `npm start` runs it, every setting its default (port
// 8000 on every address, bots on the engine's default bridge), a bot made as docs/endpoints.md makes one, and the
// TypeScript and Python clients inside that bot reach their agent with nothing set but what the agent gave it.
const run = promisify(execFile);
const fixture = new DockerFixture();
let agent: Awaited<ReturnType<typeof runAgentProcess>>;
let dataDir: string;

test.before(async () => {
  await fixture.ready();
  dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-first-hour-'));
  agent = await runAgentProcess({ AGENT_HOST: '0.0.0.0', AGENT_PORT: '8000', AGENT_DATA_DIR: dataDir });
});

test.after.always(async () => {
  agent?.process.kill('SIGKILL');
  await fixture.cleanup();
  await rm(dataDir, { recursive: true, force: true });
});

/** A bot made through the agent as docs/endpoints.md's create does, from loopback (the platform), on the default bridge. */
async function botOf(image: string, owner: string): Promise<{ id: string; container: ReturnType<typeof fixture.docker.getContainer> }> {
  const id = fixture.newBotId();
  const container = fixture.docker.getContainer(id);
  const reply = await fetch('http://127.0.0.1:8000/api/admin/bots', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ bot_id: id, user_id: owner, image, template: 'discord', token: 'discord-secret-0123456789', command: ['sh', '-c', 'echo first line; echo second line; sleep 2147483647 & wait'] }),
  });
  if (reply.status !== 201) throw new Error(`create: ${reply.status} ${await reply.text()}`);
  const bot = { id, container };
  if (!(await eventually(() => fixture.running(bot), 30_000, 100))) throw new Error('the bot never ran');
  return bot;
}

test.serial('a bot on the default bridge: the TypeScript client inside it reaches the agent as PLATFORM_AGENT_URL names it, nothing else set', async (t) => {
  const { stdout } = await run('bash', ['scripts/client-bot-image.sh', 'node', '20.20.2'], { maxBuffer: 16 * 1024 * 1024 });
  const bot = await botOf(stdout.trim().split('\n').at(-1) ?? '', 'user_first_ts');
  t.teardown(() => bot.container.remove({ force: true }).catch(() => undefined));
  const info = await bot.container.inspect();
  t.true(['default', 'bridge'].includes(info.HostConfig.NetworkMode ?? ''), info.HostConfig.NetworkMode);
  t.true((info.Config.Env ?? []).includes('PLATFORM_AGENT_URL=http://agent:8000'));
  const output = await fixture.exec(bot, 'cd /app && node check.mjs 2>&1');
  const report = JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  t.like(report.status, { bot_id: bot.id, user_id: 'user_first_ts', state: 'running' }, output);
  t.is(report.logs, 'first line\nsecond line\n', output);
});

test.serial('a bot on the default bridge: the Python client inside it reaches the agent as PLATFORM_AGENT_URL names it, nothing else set', async (t) => {
  const bot = await botOf(await pythonBotImage(), 'user_first_py');
  t.teardown(() => bot.container.remove({ force: true }).catch(() => undefined));
  const script = 'from bot_agent import BotAgentClient; import json; c = BotAgentClient.from_env(); print(json.dumps({"status": c.status(), "logs": c.logs(5)}))';
  const output = await fixture.exec(bot, `cd /opt/bot-agent-python && PYTHONPATH=src python3 -c '${script}' 2>&1`);
  const report = JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  t.like(report.status, { bot_id: bot.id, user_id: 'user_first_py', state: 'running' }, output);
  t.is(report.logs, 'first line\nsecond line\n', output);
});
