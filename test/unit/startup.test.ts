import { spawn } from 'node:child_process';
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
    level: 40,
    msg: 'the docker runtime does not answer; bot operations answer 503 until it does',
    error: 'runtime unavailable: cannot reach the docker runtime',
  });
  t.regex(String(lines.at(-1)?.cause), /ENOENT \/nonexistent\/docker\.sock/);
  t.is(agent.exitCode, null, 'the agent exited');
});
