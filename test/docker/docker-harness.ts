import type { AddressInfo } from 'node:net';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import type { BotOptions, HarnessBot, RuntimeHarness } from '../behaviours/runtime-harness.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { PACED_BOT, STUBBORN_BOT, TALKING_BOT } from '../behaviours/bot-scripts.js';
import type { TestBot } from '../helpers/docker-fixture.js';


/** The Docker runtime: real containers on the real engine, the agent on all addresses so they reach it. */
export async function dockerHarness(): Promise<RuntimeHarness> {
  const fixture = new DockerFixture();
  await fixture.ready();
  const agents: TestAgent[] = [];
  const agentOver = async (dockerHost: string, restartTimeoutMs = 60_000): Promise<TestAgent> => {
    const agent = await startAgent(createDockerDriver({ dockerHost }), { restartTimeoutMs }, '0.0.0.0');
    agents.push(agent);
    return agent;
  };
  const main = await agentOver(fixture.dockerHost);
  const gateway = (await fixture.network()).gateway;
  const made = new Map<string, { bot: TestBot; since: number }>();
  const of = (bot: HarnessBot): TestBot => made.get(bot.id)?.bot ?? (bot as TestBot);

  return {
    name: 'docker',
    agent: main.server,
    async createBot(options: BotOptions = {}) {
      const since = Math.floor(Date.now() / 1000) - 1;
      const bot = await fixture.runBot({
        owner: options.owner,
        start: options.running !== false,
        labelled: options.labelled,
        script: options.slowRestartMs ? STUBBORN_BOT : options.paced ? PACED_BOT : TALKING_BOT,
        args: options.logLines,
        stopTimeout: options.slowRestartMs ? Math.ceil(options.slowRestartMs / 1000) : undefined,
      });
      made.set(bot.id, { bot, since });
      return bot;
    },
    newBotId: () => fixture.newBotId(),
    running: (bot) => fixture.running(of(bot)),
    runId: (bot) => fixture.startedAt(of(bot)),
    restartCount: (bot) => fixture.restartEvents(of(bot), made.get(bot.id)?.since ?? 0),
    callFromBot: (bot, request) =>
      fixture.httpFromBot(of(bot), { host: gateway, port: (main.server.address() as AddressInfo).port }, request),
    agentWithRestartTimeout: async (ms) => (await agentOver(fixture.dockerHost, ms)).server,
    unreachableAgent: async () => (await agentOver('unix:///nonexistent/docker.sock')).server,
    async close() {
      await Promise.all(agents.map((agent) => agent.close()));
      await fixture.cleanup();
    },
  };
}
