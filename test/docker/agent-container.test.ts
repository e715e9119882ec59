import { readFile, stat } from 'node:fs/promises';
import test from 'ava';
import type { Container } from 'dockerode';
import { buildAgentImage } from '../helpers/agent-image.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';

// The agent as operators run it on a Docker host: the image built from the
// project's Dockerfile, a container with the alias `agent` on the bots' network
// and the engine's socket mounted; bots call http://agent:8000 from inside.
const fixture = new DockerFixture();
const image = `bot-agent-e2e:${fixture.runId}`;
const AGENT = { host: 'agent', port: 8000 };
let agent: Container;

test.before(async () => {
  await fixture.ready();
  await buildAgentImage(image);
  const network = (await fixture.network()).name;
  const socketGroup = (await stat('/var/run/docker.sock')).gid;
  agent = await fixture.docker.createContainer({
    name: `bot-agent-e2e-${fixture.runId}`,
    Image: image,
    Labels: { 'bot-agent-test': fixture.runId },
    HostConfig: {
      NetworkMode: network,
      // The host's cgroup tree, read-only, as docs/docker.md deploys it: stats come from its files.
      Binds: ['/var/run/docker.sock:/var/run/docker.sock', '/sys/fs/cgroup:/sys/fs/cgroup:ro'],
      GroupAdd: [String(socketGroup)],
    },
    NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: ['agent'] } } },
  });
  await agent.start();
});

test.after.always(async () => {
  await fixture.cleanup();
  await fixture.docker.getImage(image).remove({ force: true }).catch(() => undefined);
});

test.serial('the image runs the project\'s Node as a non-root user, and its health check turns healthy', async (t) => {
  const info = await agent.inspect();
  t.is((await fixture.exec({ id: 'agent', container: agent }, 'node --version')).trim(), `v${(await readFile('.node-version', 'utf8')).trim()}`);
  t.is(info.Config.User, 'node');
  t.deepEqual(info.Config.Entrypoint, ['node', '--max-semi-space-size=2', '--heap-growing-percent=30', '--no-allocation-site-pretenuring', '--expose-gc', 'dist/agent.mjs']);
  t.true(info.Config.Env?.includes('MALLOC_ARENA_MAX=2'), 'malloc tuned as docs/performance.md says');
  t.true(
    await eventually(async () => (await agent.inspect()).State.Health?.Status === 'healthy', 60_000, 500),
    'the HEALTHCHECK never passed',
  );
});

test.serial('self restart without a header from inside a bot restarts it, and it hears back first', async (t) => {
  const bot = await fixture.runBot();
  const before = await fixture.startedAt(bot);
  const reply = await fixture.httpFromBot(bot, AGENT, { method: 'POST', path: '/api/bots/self/restart' });
  t.is(reply.status, 200, reply.raw);
  t.like(reply.body, { ok: true });
  t.true(await eventually(async () => (await fixture.startedAt(bot)) !== before && (await fixture.running(bot))));
});

test.serial('a bot reads its own logs and stats at http://agent:8000', async (t) => {
  const bot = await fixture.runBot({ script: 'echo ready; exec sleep 1000' });
  const logs = await fixture.httpFromBot(bot, AGENT, { method: 'POST', path: '/api/bots/logs', body: { bot_id: bot.id } });
  t.like(logs, { status: 200, body: { ok: true, logs: 'ready\n' } });
  const stats = await fixture.httpFromBot(bot, AGENT, { method: 'GET', path: `/api/bots/${bot.id}/stats` });
  t.is(stats.status, 200, stats.raw);
  t.is(stats.body?.ok, true);
  // The agent, as user node, sees the bot's cgroup (cgroup v1 or v2, cgroupfs or systemd driver).
  const id = (await bot.container.inspect()).Id;
  const cpu = await fixture.exec(
    { id: 'agent', container: agent },
    `cat /sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage /sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat /sys/fs/cgroup/docker/${id}/cpu.stat 2>/dev/null; true`,
  );
  t.regex(cpu, /\d/);
});

test.serial('a bot naming another bot is refused and the other bot is untouched', async (t) => {
  const [bot, other] = await Promise.all([fixture.runBot(), fixture.runBot()]);
  const otherStart = await fixture.startedAt(other);
  const reply = await fixture.httpFromBot(bot, AGENT, {
    method: 'POST',
    path: '/api/bots/restart',
    body: { bot_id: other.id, user_id: 'user_1' },
  });
  t.is(reply.status, 403, reply.raw);
  t.regex(String(reply.body?.msg), /a bot may manage only itself/);
  t.is(await fixture.startedAt(other), otherStart);
});

test.serial('a container without the bot label is refused', async (t) => {
  const stranger = await fixture.runBot({ labelled: false });
  const reply = await fixture.httpFromBot(stranger, AGENT, { method: 'POST', path: '/api/bots/self/restart' });
  t.is(reply.status, 403, reply.raw);
  t.regex(String(reply.body?.msg), /forbidden/);
});

test.serial('docker stop ends the agent gracefully: SIGTERM reaches node, which exits 0', async (t) => {
  await agent.stop({ t: 10 });
  const state = (await agent.inspect()).State;
  t.false(state.Running);
  t.is(state.ExitCode, 0);
});
