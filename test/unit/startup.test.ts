import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';

// The agent as an operator starts it: its first lines say whether the runtime answers, and why not.
test('started against a socket that is not there, the agent says so and why, and serves on', async (t) => {
  const agent = spawn(process.execPath, ['--import=tsx', 'src/main.ts'], {
    env: { ...process.env, AGENT_HOST: '127.0.0.1', AGENT_PORT: '0', DOCKER_HOST: 'unix:///nonexistent/docker.sock' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => agent.kill('SIGKILL'));
  const lines: Array<Record<string, unknown>> = [];
  for await (const line of createInterface({ input: agent.stdout })) {
    lines.push(JSON.parse(line) as Record<string, unknown>);
    if (lines.some((l) => /runtime/.test(String(l.msg)))) break;
  }
  t.like(lines.at(-1), {
    level: 'warn',
    msg: 'the docker runtime does not answer; bot operations answer 503 until it does',
    error: 'runtime unavailable: cannot reach the docker runtime',
  });
  t.regex(String(lines.at(-1)?.cause), /ENOENT \/nonexistent\/docker\.sock/);
  t.regex(String(lines.at(-1)?.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'the time in ISO 8601');
  t.is(agent.exitCode, null, 'the agent exited');
});

// docs/api.md §7: a stopping agent says so on /readyz while it still answers, so that a Service lets it go before its port closes.
test('on SIGTERM with AGENT_SHUTDOWN_DELAY_MS, /readyz answers 503 at once while other calls are answered for the delay; then the port closes and the agent exits 0', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-shutdown-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const agent = spawn(process.execPath, ['--import=tsx', 'src/main.ts'], {
    env: { ...process.env, AGENT_HOST: '127.0.0.1', AGENT_PORT: '0', AGENT_DATA_DIR: dataDir, DOCKER_HOST: 'unix:///nonexistent/docker.sock', AGENT_SHUTDOWN_DELAY_MS: '1500' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => agent.kill('SIGKILL'));
  const exited = new Promise<number | null>((resolve) => agent.once('exit', resolve));
  // Its output is read to the end: a pipe nobody reads would fail the agent's own writes as it stops.
  const port = await new Promise<number>((resolve) =>
    createInterface({ input: agent.stdout }).on('line', (line) => {
      const fields = JSON.parse(line) as { msg?: string; port?: number };
      if (fields.msg === 'bot-agent listening') resolve(fields.port ?? 0);
    }),
  );
  const get = async (path: string) => fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2_000) });
  // At once: the agent handles signals before it says it listens.
  agent.kill('SIGTERM');
  const ready = await get('/readyz');
  t.is(ready.status, 503);
  t.regex(((await ready.json()) as { msg: string }).msg, /^shutting down/);
  t.is((await get('/healthz')).status, 200, 'still answering within the delay');
  t.is(agent.exitCode, null);
  t.is(await exited, 0);
  await t.throwsAsync(get('/healthz'), undefined, 'the port is closed');
});
