import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import type { TestBot } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { pythonBotImage } from '../helpers/python-bot.js';

// The first hour (README, docs/endpoints.md): the agent as `npm start` runs it, every setting its default (port
// 8000 on every address, bots on the engine's default bridge), a bot made as docs/endpoints.md makes one, the
// TypeScript and Python clients inside that bot reaching their agent with nothing set but what the agent gave it,
// and the page's examples run as written.
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

test.serial('npm run example-bot makes a bot that writes its lines and beats its heartbeat through http://agent:8000: healthy, stopped at once', async (t) => {
  const id = fixture.newBotId();
  const container = fixture.docker.getContainer(id);
  t.teardown(() => container.remove({ force: true }).catch(() => undefined));
  const env = { ...process.env, BOT_AGENT_URL: 'http://127.0.0.1:8000', EXAMPLE_BOT_ID: id };
  const { stdout } = await run(process.execPath, ['--import=tsx', 'scripts/example-bot.ts'], { env });
  t.regex(stdout, new RegExp(`^example-bot: Bot ${id} created and started\\n`));
  t.regex(stdout, new RegExp(`curl 'http://127.0.0.1:8000/api/bots/${id}/logs\\?lines=5'`));
  const status = async () => (await (await fetch(`http://127.0.0.1:8000/api/bots/${id}`)).json()) as { bot: { state: string; health: { status: string; check: string | null } } };
  // Its heartbeats reach the agent from the default bridge, named agent:8000 as every bot's PLATFORM_AGENT_URL.
  t.true(await eventually(async () => (await status()).bot.health.status === 'healthy', 30_000, 500), JSON.stringify(await status()));
  t.is((await status()).bot.health.check, 'heartbeat');
  const logs = (await (await fetch(`http://127.0.0.1:8000/api/bots/${id}/logs?lines=5`)).json()) as { logs: string };
  t.regex(logs.logs, /^example bot: tick 1$/m);
  t.notRegex(logs.logs, /refused or did not answer/);
  const again = await run(process.execPath, ['--import=tsx', 'scripts/example-bot.ts'], { env });
  t.regex(again.stdout, /it is used as it is/);
  const began = Date.now();
  const stopped = await fetch('http://127.0.0.1:8000/api/bots/stop', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bot_id: id, user_id: 'user_1' }) });
  t.is(stopped.status, 200);
  t.log(`stopped in ${Date.now() - began} ms`);
  t.is((await container.inspect()).State.ExitCode, 0, 'it ended on its SIGTERM, not killed after the grace');
});

/** One curl of docs/endpoints.md sent to the host's agent, with the answer its comment shows. */
interface Example {
  readonly command: string;
  readonly status: number | undefined;
  readonly answer: string | undefined;
}

/**
 * docs/endpoints.md's examples sent to `base`, in the page's order: the platform's on the host
 * (`http://localhost:8000`), a bot's from inside its container (`http://agent:8000`).
 */
function pageExamples(base: string): Example[] {
  const page = readFileSync('docs/endpoints.md', 'utf8');
  const examples: Example[] = [];
  for (const [, block] of page.matchAll(/```sh\n([\s\S]*?)```/g)) {
    // A command goes on past its line end within quotes, and after a backslash.
    const lines: string[] = [];
    for (const line of (block ?? '').replace(/\\\n\s*/g, '').split('\n')) {
      const open = lines.length > 0 && (lines.at(-1)!.split("'").length - 1) % 2 === 1;
      if (open) lines[lines.length - 1] += `\n${line}`;
      else lines.push(line);
    }
    lines.forEach((line, at) => {
      if (!line.startsWith('curl ') || !line.includes(base)) return;
      const shown = lines[at + 1]?.startsWith('# ') && !lines[at + 1]?.startsWith('# again') ? lines[at + 1]!.slice(2) : undefined;
      const status = shown && /^(\d{3}) /.exec(shown)?.[1];
      examples.push({ command: line, status: status ? Number(status) : shown ? 200 : undefined, answer: status ? shown.slice(4) : shown });
    });
  }
  return examples;
}

/** Puts the host's curl, and the libraries it loads, into a container that has none (a busybox bot), once. */
async function withHostCurl(bot: TestBot): Promise<void> {
  if ((await fixture.exec(bot, 'command -v curl || echo none')).trim() !== 'none') return;
  const curl = (await run('sh', ['-c', 'command -v curl'])).stdout.trim();
  const { stdout } = await run('ldd', [curl]);
  const libraries = [...stdout.matchAll(/(\/\S+) \(0x/g)].map((match) => match[1]!);
  // Files as their links name them, the links followed: the bot's image has none of them.
  const tar = spawn('tar', ['-chf', '-', '-C', '/', ...[curl, ...libraries].map((path) => path.slice(1))], { stdio: ['ignore', 'pipe', 'inherit'] });
  await bot.container.putArchive(tar.stdout, { path: '/' });
}

/** Fields whose shown value is the very value answered; any other is shown as an instance of its kind. */
const EXACT = new Set(['ok', 'message', 'bot_id', 'user_id', 'template', 'state', 'revision']);

/** Whether `actual` answers as `shown` (docs/endpoints.md's comment) says: its fields, `...` standing for the rest of a text. */
function answersAsShown(actual: unknown, shown: unknown, key = ''): boolean {
  if (typeof shown === 'string' && shown.includes('...')) return typeof actual === 'string' && actual.startsWith(shown.slice(0, shown.indexOf('...')));
  if (Array.isArray(shown)) return Array.isArray(actual) && shown.every((item, at) => answersAsShown(actual[at], item, key));
  if (shown !== null && typeof shown === 'object') {
    return actual !== null && typeof actual === 'object' && Object.entries(shown).every(([name, value]) => answersAsShown((actual as Record<string, unknown>)[name], value, name));
  }
  return EXACT.has(key) ? actual === shown : typeof actual === typeof shown;
}

test.serial("docs/endpoints.md's every example runs as written against the agent `npm start` runs, the platform's on the host and a bot's inside the page's bot, and answers as the page shows", async (t) => {
  const examples = pageExamples('http://localhost:8000');
  t.true(examples.length >= 10, `${examples.length} examples found`);
  const botExamples = pageExamples('http://agent:8000');
  t.true(botExamples.length >= 2, `${botExamples.length} examples of a bot's found`);
  // The page's bot, of the page's image: one that says it started and connected, then idles.
  const maker = await fixture.docker.createContainer({ Image: TEST_IMAGE, Cmd: ['true'] });
  await maker.commit({ repo: 'my-bot-image', tag: '1', changes: ['CMD ["sh", "-c", "echo started; echo connected to gateway; trap \'exit 0\' TERM; while :; do sleep 1 & wait $!; done"]'] });
  await maker.remove({ force: true });
  t.teardown(async () => {
    await fixture.docker.getContainer('bot_12_34_abc').remove({ force: true }).catch(() => undefined);
    await fixture.docker.getContainer('bot_12_34_abc.previous').remove({ force: true }).catch(() => undefined);
    await fixture.docker.getImage('my-bot-image:1').remove({ force: true }).catch(() => undefined);
  });
  const agentUrl = 'http://127.0.0.1:8000';
  const settled = async () => {
    // Each example meets the page's bot as it expects it: running, with no deploy under way.
    // Started only when stopped: lifecycle calls count against AGENT_RATE_LIMIT (6 a minute by default).
    const { bot } = (await (await fetch(`${agentUrl}/api/bots/bot_12_34_abc`)).json()) as { bot?: { state: string } };
    if (bot?.state !== 'running') {
      const started = await fetch(`${agentUrl}/api/bots/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bot_id: 'bot_12_34_abc', user_id: 'user_7' }) });
      if (started.status !== 200) throw new Error(`start: ${started.status} ${await started.text()}`);
    }
    await eventually(async () => {
      const { revisions } = (await (await fetch(`${agentUrl}/api/bots/bot_12_34_abc/revisions`)).json()) as { revisions?: { outcome: string }[] };
      return (revisions ?? []).every((revision) => revision.outcome !== 'deploying');
    }, 60_000, 250);
  };
  const create = examples.find((example) => example.command.includes('-X POST http://localhost:8000/api/admin/bots '));
  const removal = examples.find((example) => example.command.includes('-X DELETE'));
  t.truthy(create && removal);
  const bot: TestBot = { id: 'bot_12_34_abc', container: fixture.docker.getContainer('bot_12_34_abc') };
  const sent: { example: Example; inBot: boolean }[] = [create!, ...examples.filter((one) => one !== create && one !== removal)].map((example) => ({ example, inBot: false }));
  // A bot's own calls, from inside the page's bot once it is made (it has no curl of its own: the host's is put in it).
  sent.splice(1, 0, ...botExamples.map((example) => ({ example, inBot: true })));
  sent.push({ example: removal!, inBot: false });
  for (const { example, inBot } of sent) {
    if (example !== create) await settled();
    if (inBot) await withHostCurl(bot);
    const written = example.command.replace(/^curl /, "curl -s -w '\\n%{http_code}' ");
    const startedBefore = inBot ? (await bot.container.inspect()).State.StartedAt : undefined;
    const stdout = inBot ? await fixture.exec(bot, written) : (await run('sh', ['-c', written])).stdout;
    // A bot that restarts itself is restarted just after its answer: the next example meets its next run.
    if (example.command.includes('/self/restart')) {
      t.true(await eventually(async () => {
        const { State } = await bot.container.inspect();
        return State.Running && State.StartedAt !== startedBefore;
      }, 60_000, 200), 'the bot was not restarted');
    }
    const status = Number(stdout.slice(stdout.lastIndexOf('\n') + 1));
    const body = stdout.slice(0, stdout.lastIndexOf('\n'));
    t.is(status, example.status ?? 200, `${example.command}\n${body}`);
    if (example.answer === undefined) continue;
    let shown: unknown;
    try {
      shown = JSON.parse(example.answer);
    } catch {
      // A shape the page abbreviates (`[{...},...]`): its beginning, as far as it is written out.
      t.true(body.startsWith(example.answer.slice(0, example.answer.indexOf('...'))), `${example.command}\nshown: ${example.answer}\nanswered: ${body}`);
      continue;
    }
    t.true(answersAsShown(JSON.parse(body), shown), `${example.command}\nshown: ${example.answer}\nanswered: ${body}`);
  }
  t.is((await fetch(`${agentUrl}/api/bots/bot_12_34_abc`)).status, 404, 'the page\'s removal removed it');
});
