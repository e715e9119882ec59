import type { AddressInfo } from 'node:net';
import test from 'ava';
import { BotAgentClient } from '../../clients/typescript/src/index.js';
import type { BotEvent, LogLine } from '../../clients/typescript/src/index.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';

// The client library against the agent on the real engine: a real bot's lines, its end, its record.
const fixture = new DockerFixture();
let agent: TestAgent;

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }));
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

test('a real bot followed through the client: its lines and its end, then its status and exit record', async (t) => {
  const bot = await fixture.runBot({ script: 'echo "hello $RANDOM"; sleep 2; echo "fatal: no token" >&2; exit 3' });
  const { port } = agent.server.address() as AddressInfo;
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${port}`, env: { BOT_ID: bot.id } });
  const controller = new AbortController();
  const seen: Array<LogLine | BotEvent> = [];
  for await (const item of client.followLogs({ signal: controller.signal })) {
    seen.push(item);
    if (item.type === 'exited') controller.abort();
  }
  const lines = seen.filter((item): item is LogLine => item.type === 'log');
  t.regex(lines[0]?.line ?? '', /^hello \d+$/);
  t.like(lines[1], { line: 'fatal: no token', stream: 'stderr' });
  t.like(seen.at(-1), { type: 'exited', bot_id: bot.id, exit: { exit_code: 3, requested: false } });
  t.like(await client.status(), { bot_id: bot.id, state: 'exited', crashes_last_hour: 1, last_exit: { exit_code: 3 } });
  const [exit] = await client.exits(1);
  t.regex(exit?.logs ?? '', /^hello \d+\nfatal: no token\n$/);
});
