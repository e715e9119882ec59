import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

// The Python client's tests (clients/python/tests), run with pytest from inside a real bot: a container on
// the real engine (test/docker/python-client.test.ts) and a pod on the real cluster (test/kube-cluster/).

/**
 * The bot's first process: it crashes with code 3 on SIGUSR1 (so that the tests find an exit record and its
 * event), and on SIGTERM, the restart the last test asks for, waits until pytest has printed its summary.
 */
export const PYTHON_BOT_SCRIPT =
  "trap 'exit 3' USR1; trap 'n=0; while [ ! -e /tmp/pytest-done ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; sleep 1; exit 0' TERM; " +
  'echo python bot up; while :; do sleep 1; done';

/** Runs the suite inside the bot; `-p no:cacheprovider`: a bot's files may be read-only to it. */
export const PYTEST_SCRIPT = 'cd /opt/bot-agent-python && python3 -m pytest -v -p no:cacheprovider tests 2>&1; touch /tmp/pytest-done';

/** The exit code the tests look for among the bot's exit records. */
export const CRASH_CODE = '3';

/** The image scripts/python-bot-image.sh makes (the machine's python3, pytest, httpx and the client), by its tag. */
export async function pythonBotImage(): Promise<string> {
  const { stdout } = await run('bash', ['scripts/python-bot-image.sh'], { maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim().split('\n').at(-1) ?? '';
}

/** pytest's closing line (`=== 19 passed in 9.1s ===`), and whether it says all passed: none failed, errored or was skipped. */
export function pytestSummary(output: string): { line: string; passed: number; clean: boolean } {
  const line = output.trim().split('\n').reverse().find((candidate) => /^=+ .* in [\d.]+s/.test(candidate)) ?? '';
  const passed = Number(/(\d+) passed/.exec(line)?.[1] ?? 0);
  return { line, passed, clean: passed > 0 && !/failed|error|skipped|xfail|xpass|deselected/.test(line) };
}
