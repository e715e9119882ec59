import { loadConfig } from './config.js';

/** The container's HEALTHCHECK: exits 0 when the agent's /healthz answers ok. */
const { host, port } = loadConfig();
const target = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;

try {
  const reply = await fetch(`http://${target.includes(':') ? `[${target}]` : target}:${port}/healthz`, {
    signal: AbortSignal.timeout(2_000),
  });
  process.exit(reply.ok ? 0 : 1);
} catch {
  process.exit(1);
}
