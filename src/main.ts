import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { ConfigError, loadConfig } from './config.js';
import { causeOf } from './errors.js';
import type { Config } from './config.js';
import { createAgent, historyPlace } from './agent.js';
import { DEFAULT_CONNECTION_LIMITS } from './http/connection-limits.js';
import { hopsOf } from './http/hops.js';
import { listen } from './http/listen.js';
import { BatchedLines } from './log-destination.js';

/**
 * How long a SIGTERM waits for requests and lifecycle operations in flight;
 * inside Docker's default 10 s stop grace. A restart cut short here still
 * completes: the engine carries it out, not the agent.
 */
const DRAIN_MS = 8_000;
/** Log lines are written once this much waits, or LOG_FLUSH_MS after the first line waiting. */
const LOG_BATCH_CHARS = 8_192;
const LOG_FLUSH_MS = 1_000;

function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`bot-agent: ${err.message}\n`);
    process.exit(1);
  }
}

/** The password of AGENT_DATABASE_URL, as the server gets it (percent-decoded). */
function databasePassword(url: string | undefined): string | undefined {
  const password = url === undefined ? undefined : URL.parse(url)?.password;
  if (!password) return undefined;
  try {
    return decodeURIComponent(password);
  } catch {
    // Not a valid escape (a stray %): the password as written.
    return password;
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Says why the agent cannot run, in one line, and ends it. */
function exit(why: string): never {
  process.stderr.write(`bot-agent: ${why}\n`);
  process.exit(1);
}

/** Reads the configuration, builds the agent (src/agent.ts), listens, and drains on SIGTERM or SIGINT. */
async function main(): Promise<void> {
  // Whatever the agent writes (AGENT_DATA_DIR) is its own alone; src/private-files.ts makes sure of it file by file too.
  process.umask(0o077);
  const config = configOrExit();
  // Written asynchronously and in batches: a write per request line cost more than answering the request.
  // Lines go out once 8 KiB are waiting, or within a second; what is left is written at exit.
  const secrets = [config.adminToken, config.webhook?.secret, databasePassword(config.databaseUrl)];
  // Named levels and ISO 8601 times: lines an operator reads, and log tools parse, as they are.
  const logger = pino(
    { level: config.logLevel, base: { runtime: config.runtime }, formatters: { level: (label) => ({ level: label }) }, timestamp: pino.stdTimeFunctions.isoTime },
    new BatchedLines(1, LOG_BATCH_CHARS, LOG_FLUSH_MS, secrets),
  );
  // Every stream handler is guarded; should a bug still throw outside a request, it is logged and the agent goes on
  // serving every other bot: the process ends only on a signal.
  process.on('uncaughtException', (err) => logger.error({ err }, 'bug: uncaught exception; the agent goes on'));
  process.on('unhandledRejection', (err) => logger.error({ err }, 'bug: unhandled rejection; the agent goes on'));
  const agent = await createAgent(config, logger).catch((err: Error) => exit(err.message));
  // A database away at start is an outage like any other: the agent serves, and what it must record waits in its spool.
  await agent.opened().catch((err: unknown) =>
    logger.warn({ error: messageOf(err) }, `the history in ${historyPlace(config)} does not answer; the agent serves, and what it records waits in the spool`),
  );

  const limits = { ...DEFAULT_CONNECTION_LIMITS, perAddress: config.connectionsPerAddress, isHop: hopsOf(config.identity, config.proxyAddresses) };
  const server = await listen(agent.app, config.host, config.port, limits).catch((err: Error) => {
    exit(`cannot listen on ${config.host}:${config.port}: ${err.message}`);
  });
  // Stop accepting, let requests and lifecycle operations in flight finish (bounded), exit 0.
  const shutdown = async (signal: string): Promise<void> => {
    logger.info({ signal, delay_ms: config.shutdownDelayMs }, 'shutting down');
    // Not ready at once, still answering for the delay: whatever follows readiness (a Service) stops sending calls
    // here before the port closes (docs/api.md §7).
    agent.readiness.stop();
    await new Promise((resolve) => setTimeout(resolve, config.shutdownDelayMs));
    setTimeout(() => {
      logger.warn({ ms: DRAIN_MS }, 'operations still running at the drain deadline; exiting');
      process.exit(0);
    }, DRAIN_MS).unref();
    const closed = new Promise((resolve) => server.close(resolve));
    await agent.lifecycle.drain();
    // Event and log streams never end by themselves: give other requests a moment, then cut them.
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1_000))]);
    server.closeAllConnections();
    await agent.close();
    process.exit(0);
  };
  // Before the line that says the agent listens: whoever waits for it may stop the agent at once.
  process.once('SIGTERM', (signal) => void shutdown(signal));
  process.once('SIGINT', (signal) => void shutdown(signal));

  // The port bound, which AGENT_PORT=0 leaves to the system.
  logger.info({ host: config.host, port: (server.address() as AddressInfo).port }, 'bot-agent listening');
  // Whoever started the agent waits for this line: it goes out now, not with the next batch.
  logger.flush();
  agent.driver.ping().then(
    () => logger.info(`the ${config.runtime} runtime answers`),
    (err: unknown) =>
      logger.warn(
        { error: err instanceof Error ? err.message : String(err), cause: causeOf(err) },
        `the ${config.runtime} runtime does not answer; bot operations answer 503 until it does`,
      ),
  );
}

await main();
