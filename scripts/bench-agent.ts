// The agent as the benches run it: built, started by `npm start`'s own script (the Node flags of the image), its log
// in a file of its own.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/helpers/free-port.js';

/** The built agent in a process of its own, on all addresses and a free port, once it is ready; on core `pin` if given. */
export async function agentProcess(env: Record<string, string>, pin?: string): Promise<{ agent: ChildProcess; port: number; log(): string }> {
  const port = await freePort();
  // Its records in a folder of its own, not ./data of the work tree.
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-bench-'));
  // Its log goes to a file, read when asked: piped into this process, every request's line cost this
  // process (which also runs autocannon) CPU, and the agent's measured throughput with it.
  const logFile = join(dataDir, 'agent.log');
  const logFd = openSync(logFile, 'a');
  // Started by `npm start`'s own script, so with the same Node flags as it and the image (it execs node: the pid is the agent's).
  // taskset execs bash, which execs node: the pid is still the agent's.
  const agent = spawn(pin === undefined ? 'bash' : 'taskset', [...(pin === undefined ? [] : ['-c', pin, 'bash']), 'scripts/start.sh'], {
    env: { ...process.env, AGENT_HOST: '0.0.0.0', AGENT_PORT: String(port), AGENT_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  agent.once('exit', (code, signal) => {
    // An agent that failed (not one stopped by a signal, nor one that ended cleanly on SIGTERM) says why: its log's end, before the folder goes.
    if (signal === null && code !== 0) process.stderr.write(`bench: the agent on port ${port} exited with code ${code}; its log ends:\n${readFileSync(logFile, 'utf8').slice(-4_000)}\n`);
    rmSync(dataDir, { recursive: true, force: true });
  });
  for (let i = 0; i < 100 && !(await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { agent, port, log: () => readFileSync(logFile, 'utf8') };
}
