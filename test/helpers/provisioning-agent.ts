import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import type { Logger } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { AgentConfig, AgentParts } from '../../src/agent.js';
import type { Identity } from '../../src/config.js';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { listen } from '../../src/http/listen.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import type { DockerProvisionerOptions } from '../../src/runtime/docker/docker-provisioner.js';
import { TEST_ADMIN_TOKEN, TEST_APP_CONFIG } from './agent.js';
import type { DockerFixture } from './docker-fixture.js';

/** An agent on the real engine that creates bots on the fixture's network, with their tokens, and where bots reach it. */
export interface ProvisioningAgent {
  readonly server: Server;
  /** The agent as the bots reach it from their network. */
  readonly target: { host: string; port: number };
  close(): Promise<void>;
}

/**
 * The agent as a platform runs it beside Docker bots it makes (the admin token is the platform: under a token
 * identity loopback is a hop), signing their tokens with `tokens`. Its samples are off, and its watchdog unless
 * asked for: on an engine other test files share, it restarts none of their bots.
 */
export async function provisioningAgent(
  fixture: DockerFixture,
  identity: Identity,
  {
    tokens = BotTokens.open(':memory:'),
    logger = pino({ level: 'silent' }),
    pulls = {},
    config = {},
    watchdog = 'off',
    restoresInCare = () => false,
    dataUsage,
  }: {
    tokens?: BotTokens;
    logger?: Logger;
    pulls?: Pick<DockerProvisionerOptions, 'registryLogins' | 'pullTimeoutMs' | 'registries'>;
    config?: Partial<AgentConfig>;
    /** Off unless asked for; a test that asks keeps it to its own bots (`watches`). */
    watchdog?: AgentParts['watchdog'];
    /** None unless asked for: on an engine other test files share, it settles none of their restores. */
    restoresInCare?: AgentParts['restoresInCare'];
    dataUsage?: AgentParts['dataUsage'];
  } = {},
): Promise<ProvisioningAgent> {
  const network = await fixture.network();
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  const { app, close } = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network: network.name, agentUrl: 'http://agent:8000', tokens, ...pulls }),
    botTokens: tokens,
    config: { ...TEST_APP_CONFIG, identity, adminToken: TEST_ADMIN_TOKEN, ...config },
    logger,
    watchdog,
    restoresInCare,
    dataUsage,
    statsSamples: 'off',
  });
  const server = await listen(app, '0.0.0.0', 0);
  return {
    server,
    target: { host: network.gateway, port: (server.address() as AddressInfo).port },
    async close() {
      server.closeAllConnections();
      server.close();
      await close();
      await driver.close();
    },
  };
}
