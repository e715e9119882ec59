import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { BOT_LABEL, OWNER_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { PrivateEngine } from '../helpers/private-engine.js';

// The real engine restarted under the agent's feet (docs/performance.md, "Connections to the engine"): the
// connections the agent keeps open die with it, and none of them may be used again once it is back.
// An engine of this file's own, so that the one every other file shares is never stopped.
const fixture = new DockerFixture();
const engine = new PrivateEngine('restart');

test.before(async () => {
  await fixture.ready();
  await engine.start();
  await engine.withTestImage(fixture.docker);
});

test.after.always(() => engine.destroy());

test('dockerd restarted under load: each call meanwhile is answered, a 409 or a 503; every call after it answers', async (t) => {
  const docker = engine.docker();
  const id = `bot_${process.pid}_1_enginerestart`;
  const container = await docker.createContainer({
    name: id,
    Image: TEST_IMAGE,
    Cmd: ['sh', '-c', "for i in 1 2 3; do echo line $i; done; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"],
    Labels: { [BOT_LABEL]: id, [OWNER_LABEL]: 'user_1' },
    // The engine starts it again when it comes back.
    HostConfig: { NetworkMode: 'none', RestartPolicy: { Name: 'unless-stopped' } },
  });
  await container.start();
  const sharedBridge = existsSync('/sys/class/net/docker0');
  const agent = await startAgent(createDockerDriver({ dockerHost: engine.dockerHost }));
  t.teardown(agent.close);
  const within10s = () => ({ signal: AbortSignal.timeout(10_000) });
  const calls = [
    () => call(agent.server, `/api/bots/${id}`, within10s()),
    () => call(agent.server, '/api/bots/logs', { body: { bot_id: id, lines: 3 }, ...within10s() }),
    () => call(agent.server, `/api/bots/${id}/stats`, within10s()),
  ];
  for (const made of calls) t.is((await made()).status, 200);

  let loading = true;
  const meanwhile: string[] = [];
  const loops = Array.from({ length: 6 }, async (_, at) => {
    while (loading) {
      const reply = await calls[at % calls.length]!();
      meanwhile.push(`${reply.status} ${reply.text.slice(0, 120)}`);
    }
  });
  await sleep(500);
  await engine.stop();
  await sleep(300);
  await engine.start();
  t.true(await eventually(async () => (await container.inspect()).State.Running, 30_000, 100), 'the engine did not start the bot again');
  loading = false;
  await Promise.all(loops);
  t.true(meanwhile.length > 20, `${meanwhile.length} calls under load`);
  t.deepEqual(
    meanwhile.filter((reply) => !/^(200|409|503) /.test(reply)),
    [],
    'a call while the engine went away and came back was answered, or refused as not running or unavailable',
  );
  const refused = meanwhile.filter((reply) => reply.startsWith('503 ')).length;
  t.true(refused > 0, 'some call found the engine gone');
  t.log(`${meanwhile.length} calls while the engine restarted: ${refused} found it gone (503)`);

  // Every call from the moment the engine runs the bot again: no connection from before the restart is used.
  const after: string[] = [];
  for (let round = 0; round < 30; round += 1) {
    for (const made of calls) {
      const reply = await made();
      if (reply.status !== 200) after.push(`${reply.status} ${reply.text.slice(0, 200)}`);
    }
  }
  t.deepEqual(after, [], 'every call after the restart answered');
  t.is(existsSync('/sys/class/net/docker0'), sharedBridge, "the shared engine's bridge is untouched");
  // Both runs' lines, read through the engine that came back.
  t.like(await call(agent.server, '/api/bots/logs', { body: { bot_id: id, lines: 6 }, ...within10s() }), {
    status: 200,
    body: { logs: 'line 1\nline 2\nline 3\nline 1\nline 2\nline 3\n' },
  });
});
