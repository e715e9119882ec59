import { once } from 'node:events';
import type { Server } from 'node:http';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { AgentConfig, AgentParts } from '../../src/agent.js';
import type { BotTokenVerifier } from '../../src/identity/bot-tokens.js';
import type { Heartbeats } from '../../src/health/heartbeats.js';
import type { BotHistory } from '../../src/history/bot-history.js';
import type { BotLifecycle } from '../../src/lifecycle/bot-lifecycle.js';
import type { BotLocks } from '../../src/runtime/bot-locks.js';
import { listen } from '../../src/http/listen.js';
import type { Provisioner } from '../../src/provisioning/provisioner.js';
import type { RuntimeDriver } from '../../src/runtime/driver.js';
import type { StatsSamplesOptions } from '../../src/stats/stats-samples.js';

/** The agent's configuration in tests: the contract's defaults. */
export const TEST_APP_CONFIG: AgentConfig = {
  restartTimeoutMs: 60_000,
  adminToken: undefined,
  rateLimit: 6,
  rateWindowMs: 60_000,
  readRate: 20,
  dataDir: ':memory:',
  databaseUrl: undefined,
  webhook: undefined,
  trustedHosts: [],
  proxyAddresses: [],
  readyGraceMs: 0,
  provisioning: true,
  loopbackPlatform: true,
  identity: 'address',
};

/** The platform's token for agents under a token identity, where loopback is a hop and never the platform (docs/api.md §4, rule 6). */
export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdef0123';
/** The headers of a platform call holding TEST_ADMIN_TOKEN. */
export const asPlatform: Readonly<Record<string, string>> = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

/** A running agent on a free port, for one test file. */
export interface TestAgent {
  server: Server;
  /** Its lifecycle: `drain()` resolves once every operation started so far has ended. */
  lifecycle: BotLifecycle;
  /** Its exit records and events. */
  history: BotHistory;
  /** The heartbeats it took (docs/api.md §13). */
  heartbeats: Heartbeats;
  close(): Promise<void>;
}

/** What a test may add to the app beyond its configuration. */
export type TestAgentOptions = Partial<AgentConfig> & {
  recoverAfterMs?: number;
  locks?: BotLocks;
  statsSamples?: StatsSamplesOptions | 'off';
  botTokens?: BotTokenVerifier;
  /** Off unless asked for: on an engine other test files share, a watchdog would act on their bots too. */
  watchdog?: AgentParts['watchdog'];
  /** The port to listen on (a fleet's agents say theirs before they start); a free one when undefined. */
  port?: number;
  /** When the bots' data folders are measured (docs/api.md §19). */
  dataUsage?: AgentParts['dataUsage'];
};

/** Starts the agent's app over `driver`; `host` 0.0.0.0 lets containers reach it. */
export async function startAgent(
  driver: RuntimeDriver,
  // Off unless asked for: the samples' reads would show among the runtime calls a test counts.
  { recoverAfterMs, locks, statsSamples = 'off', botTokens, watchdog = 'off', port = 0, dataUsage, ...config }: TestAgentOptions = {},
  host = '127.0.0.1',
  provisioner?: Provisioner,
): Promise<TestAgent> {
  const made = assembleAgent({
    driver,
    provisioner,
    config: { ...TEST_APP_CONFIG, ...config },
    logger: pino({ level: 'silent' }),
    recoverAfterMs,
    locks,
    statsSamples,
    botTokens,
    watchdog,
    dataUsage,
  });
  const server = await listen(made.app, host, port);
  return {
    server,
    lifecycle: made.lifecycle,
    history: made.history,
    heartbeats: made.heartbeats,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
      await made.close();
    },
  };
}

/** Starts an agent over `driver` that closes when the test `t` ends. */
export async function agentFor(
  t: { teardown(fn: () => Promise<void>): void },
  driver: RuntimeDriver,
  config: TestAgentOptions = {},
): Promise<Server> {
  const agent = await startAgent(driver, config);
  t.teardown(agent.close);
  return agent.server;
}
