import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import ts from 'typescript';
import { cyclesOf, importGraph, packagesLoadedWith } from '../helpers/import-graph.js';
import type { PartGraph } from '../helpers/import-graph.js';

// The arrows between src's parts run one way: the HTTP adapter and the lifecycle stand on the runtime
// drivers and the history, never the other way round (docs/architecture.md).
const graph = importGraph(fileURLToPath(new URL('../../src/', import.meta.url)));

test('no part of src imports, through any path, a part that imports it', (t) => {
  t.deepEqual(cyclesOf(graph), []);
});

test('the runtime drivers and the provisioning know nothing of HTTP, the lifecycle, the history or the agent', (t) => {
  for (const low of ['runtime/', 'provisioning/']) {
    const above = [...(graph.get(low) ?? [])].filter((part) => ['http/', 'lifecycle/', 'history/', 'client/', 'agent.ts', 'main.ts'].includes(part));
    t.deepEqual(above, [], `${low} imports ${above.join(', ')}`);
  }
});

test('the agent is built in one place: main alone imports it', (t) => {
  const builders = [...graph].filter(([, edges]) => edges.has('agent.ts')).map(([part]) => part);
  t.deepEqual(builders, ['main.ts']);
});

// What the agent loads at start is what every agent carries in memory: a runtime's client only where it is the
// runtime, the S3 SDK only where a backup store is used (docs/performance.md, "What a Kubernetes agent held").
test("the agent's start loads no runtime's client and no S3 SDK: each is loaded where it is used", (t) => {
  const loaded = packagesLoadedWith(fileURLToPath(new URL('../../src/main.ts', import.meta.url)));
  t.true(loaded.has('koa') && loaded.has('pg'), 'the walk follows src through its imports');
  for (const name of ['dockerode', '@kubernetes/client-node', '@aws-sdk/client-s3', '@aws-sdk/lib-storage']) {
    t.false(loaded.has(name), `${name}, imported by ${loaded.get(name)}`);
  }
});

test('the cycle check finds a cycle of any length, and the path that closes it', (t) => {
  const made: PartGraph = new Map([
    ['a/', new Set(['b/'])],
    ['b/', new Set(['c/'])],
    ['c/', new Set(['a/'])],
    ['d/', new Set(['a/'])],
  ]);
  t.deepEqual(cyclesOf(made), ['a/ -> b/ -> c/ -> a/']);
  t.deepEqual(cyclesOf(new Map([['a/', new Set(['b/'])], ['b/', new Set<string>()]])), []);
});

// The console may take from outside only the answers' types (the client's wire.ts) and the agent's list of event types,
// a module that imports nothing: so no agent code with its dependencies reaches the browser's bundle.
const CONSOLE_OUTSIDE = ['../clients/typescript/src/wire.js', '../src/history/event-types.js'];

test("the console is a front end of its own (console/): nothing of it in src, and it takes from outside only the answers' types and the list of event types", (t) => {
  const src = fileURLToPath(new URL('../../src/', import.meta.url));
  const consoleDir = fileURLToPath(new URL('../../console/', import.meta.url));
  t.false(readdirSync(src, { recursive: true, encoding: 'utf8' }).some((file) => /\.(tsx|css|html)$/.test(file)), 'browser code in src');
  const fromSrc = readdirSync(consoleDir)
    .filter((file) => /\.tsx?$/.test(file))
    .flatMap((file) => ts.preProcessFile(readFileSync(join(consoleDir, file), 'utf8'), true, true).importedFiles.map((imported) => imported.fileName))
    .filter((fileName) => fileName.startsWith('../'));
  t.true(fromSrc.length > 0, 'the console names its types');
  t.deepEqual([...new Set(fromSrc)].filter((fileName) => !CONSOLE_OUTSIDE.includes(fileName)), []);
  const eventTypes = readFileSync(fileURLToPath(new URL('../../src/history/event-types.ts', import.meta.url)), 'utf8');
  t.deepEqual(ts.preProcessFile(eventTypes, true, true).importedFiles, [], 'src/history/event-types.ts imports nothing');
});

test('what agents share beside the history (shared/) stands on nothing of the agent, and the history takes nothing from the lifecycle', (t) => {
  t.deepEqual([...(graph.get('shared/') ?? [])], []);
  t.false(graph.get('history/')?.has('lifecycle/'), 'history/ imports lifecycle/');
});

test("the TypeScript client (clients/typescript) is a package of its own: no dependency, and it imports only the platform (node:) and its own files", (t) => {
  const dir = fileURLToPath(new URL('../../clients/typescript/', import.meta.url));
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) t.is(manifest[field], undefined, `package.json has ${field}`);
  const imported = readdirSync(join(dir, 'src'))
    .filter((file) => file.endsWith('.ts'))
    .flatMap((file) => ts.preProcessFile(readFileSync(join(dir, 'src', file), 'utf8'), true, true).importedFiles.map((each) => each.fileName));
  t.true(imported.length > 0);
  t.deepEqual(imported.filter((name) => !name.startsWith('./') && !name.startsWith('node:')), []);
});
