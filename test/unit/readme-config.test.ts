import { readFileSync } from 'node:fs';
import test from 'ava';

// The README's configuration table and src/config.ts are one source (the README's promise): every variable the
// agent reads is a row of the table, and every row names a variable it reads.
const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The variables of the configuration's schema: its keys, one a line. */
function variablesRead(): string[] {
  return [...read('src/config.ts').matchAll(/^\s+((?:AGENT_[A-Z0-9_]+)|DOCKER_HOST):/gm)].map((match) => match[1]!);
}

/** The variables the README's table names: the backticked names in each row's first cell, under `## Configuration`. */
function variablesInReadme(): string[] {
  const section = read('README.md').split(/^## /m).find((part) => part.startsWith('Configuration')) ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((match) => match[1]!));
}

test("every variable the agent reads is in the README's table, and the table names no other", (t) => {
  const code = new Set(variablesRead());
  const readme = new Set(variablesInReadme());
  t.true(code.size > 30, `only ${code.size} variables found in src/config.ts`);
  t.deepEqual([...code].filter((name) => !readme.has(name)).sort(), [], "read by src/config.ts, missing from the README's table");
  t.deepEqual([...readme].filter((name) => !code.has(name)).sort(), [], "in the README's table, read by nothing");
});
