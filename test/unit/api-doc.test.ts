import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { openApiDocument } from '../../src/http/openapi.js';

// docs/api.md is the API in words, /openapi.json the same API for machines: neither may know an operation
// or a status the other does not.
const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const sectionOf = (number: number) => doc.split(/^## /m).find((section) => section.startsWith(`${number}. `)) ?? '';

const operations = Object.entries(openApiDocument.paths).flatMap(([path, methods]) =>
  Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
);

test('every operation of /openapi.json is in docs/api.md §2, and §2 names none it lacks', (t) => {
  const listed = [...sectionOf(2).matchAll(/^\| [^|]+ \| `([A-Z]+ \/[^`]*)`/gm)].map((match) => match[1]);
  t.deepEqual([...listed].sort(), [...operations].sort());
});

test('every status an operation of /openapi.json can answer is in docs/api.md §3', (t) => {
  const documented = new Set([...sectionOf(3).matchAll(/^\| (\d{3}) \|/gm)].map((match) => match[1] ?? ''));
  const answered = new Set(
    Object.values(openApiDocument.paths).flatMap((methods) =>
      Object.values(methods).flatMap((operation) => Object.keys((operation as { responses: object }).responses)),
    ),
  );
  const failures = [...answered].filter((status) => Number(status) >= 400);
  t.true(failures.length > 5);
  t.deepEqual(failures.filter((status) => !documented.has(status)), []);
  t.deepEqual([...documented].filter((status) => !answered.has(status)), [], 'a status §3 names that no operation answers');
});

test('nothing in the repository cites a contract file outside it: docs/api.md or the README instead', (t) => {
  const outside = new RegExp(['CONTRACT', '(\\.md)?\\s*§'].join(''));
  const root = new URL('../../', import.meta.url);
  const citing = ['src', 'test', 'scripts', 'charts', 'docs', 'README.md', 'Dockerfile']
    .flatMap((entry) => filesUnder(fileURLToPath(new URL(entry, root))))
    .filter((file) => outside.test(readFileSync(file, 'utf8')));
  t.deepEqual(citing, []);
});

function filesUnder(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).flatMap((name) => filesUnder(join(path, name)));
}
