import { pino } from 'pino';
import { ConfigError, loadConfig } from './config.js';
import type { Config } from './config.js';
import { createApp } from './http/create-app.js';
import { listen } from './http/listen.js';
import { createDriver } from './runtime/create-driver.js';

/** How long a SIGTERM waits for lifecycle operations in flight before the agent exits anyway. */
const DRAIN_MS = 30_000;

function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`bot-agent: ${err.message}\n`);
    process.exit(1);
  }
}

async function main(): Promise<void> {
  const config = configOrExit();
  const logger = pino({ base: { runtime: config.runtime } });
  let driver;
  try {
    driver = createDriver(config);
  } catch (err) {
    process.stderr.write(`bot-agent: ${(err as Error).message}\n`);
    process.exit(1);
  }
  const { app, lifecycle } = createApp({ driver, config, logger });

  const server = await listen(app, config.host, config.port).catch((err: Error) => {
    process.stderr.write(`bot-agent: cannot listen on ${config.host}:${config.port}: ${err.message}\n`);
    process.exit(1);
  });
  logger.info({ host: config.host, port: config.port }, 'bot-agent listening');

  const shutdown = (signal: string): void => {
    logger.info({ signal }, 'shutting down');
    server.close();
    server.closeIdleConnections();
    const deadline = setTimeout(() => process.exit(0), DRAIN_MS);
    void lifecycle.drain().then(() => {
      clearTimeout(deadline);
      process.exit(0);
    });
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

await main();
