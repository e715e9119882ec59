import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';

const run = promisify(execFile);

// The Python client is a typed package (py.typed): mypy, a judge nobody here wrote, checks it and its
// tests in strict mode. A mypy that crashed (exit 2) judged nothing, and fails this test as a finding does.
test('mypy --strict finds nothing in the Python client and its tests', async (t) => {
  const { stdout } = await run('bash', ['scripts/python-bot-image.sh', '--venv']);
  const venv = stdout.trim().split('\n').at(-1) ?? '';
  const checked = await run(`${venv}/bin/mypy`, ['--strict', '--cache-dir=/dev/null', 'src', 'tests'], { cwd: 'clients/python' }).then(
    ({ stdout: out }) => ({ code: 0, out }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? -1, out: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
  );
  t.is(checked.code, 0, checked.out);
  t.regex(checked.out, /^Success: no issues found in \d+ source files/m);
});
