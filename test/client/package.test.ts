import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';

// The TypeScript client as a bot's project gets it (docs/clients.md): built by its own tsconfig, packed by npm,
// installed from the tarball; its types are those a strict TypeScript project compiles against.
const run = promisify(execFile);
const TSC = resolve('node_modules/typescript/bin/tsc');

test('packed and installed, the client is an ES module with its types: a strict NodeNext project compiles against it, and a misuse is a type error', async (t) => {
  await run(process.execPath, [TSC, '-p', 'clients/typescript']);
  const work = mkdtempSync(join(tmpdir(), 'bot-agent-client-pack-'));
  await run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', work, './clients/typescript']);
  const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
  t.truthy(tarball, 'npm pack made no tarball');
  const installed = join(work, 'bot', 'node_modules', 'bot-agent-client');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', join(work, tarball!), '-C', installed, '--strip-components=1']);
  const packed = (await run('tar', ['-tzf', join(work, tarball!)])).stdout.split('\n');
  t.true(packed.includes('package/dist/index.d.ts') && packed.includes('package/dist/index.js') && packed.includes('package/dist/cli.js'), packed.join(' '));
  t.false(packed.some((name) => name.startsWith('package/src/')), 'the sources were packed');
  const bot = join(work, 'bot');
  writeFileSync(join(bot, 'package.json'), JSON.stringify({ name: 'a-bot', private: true, type: 'module' }));
  const compile = (source: string) => {
    writeFileSync(join(bot, 'main.ts'), source);
    return run(process.execPath, [TSC, '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--typeRoots', resolve('node_modules/@types'), join(bot, 'main.ts')]);
  };
  await t.notThrowsAsync(
    compile(`import { BotAgentClient, BotAgentError } from 'bot-agent-client';
import type { BotStats, BotStatus, ExitRecord, LogLine } from 'bot-agent-client';
const agent = await BotAgentClient.create({ externalUrl: 'https://agent.example.com' });
const stats: BotStats = await agent.stats();
const status: BotStatus = await agent.status();
const exits: ExitRecord[] = await agent.exits(5);
for await (const item of agent.followLogs({ lines: 5 })) if (item.type === 'log') console.log((item as LogLine).line);
try { await agent.restart(); } catch (err) { if (err instanceof BotAgentError) console.log(err.status, err.msg); }
console.log(stats.cpu_percent.toFixed(1), status.state, exits.length);
`),
  );
  const misuse = await t.throwsAsync(compile(`import { BotAgentClient } from 'bot-agent-client';\nconst agent = await BotAgentClient.create();\nawait agent.logs('twenty');\n`));
  t.regex(String((misuse as { stdout?: string }).stdout), /TS2345/, 'a wrong argument compiled: the types are not read');
});

test("the client's own project installs from its lockfile with no network (npm ci --offline), at the versions the agent's lockfile pins, and builds", async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'bot-agent-client-offline-'));
  await run('cp', ['-r', 'clients/typescript/package.json', 'clients/typescript/package-lock.json', 'clients/typescript/tsconfig.json', 'clients/typescript/src', work]);
  // The tarballs come from npm's cache, which the agent's own `npm ci` filled: the same versions, or none at all.
  await run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: work });
  const own = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { version?: string }> };
  const client = JSON.parse(readFileSync(join(work, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  for (const name of ['node_modules/typescript', 'node_modules/@types/node']) t.is(client.packages[name]?.version, own.packages[name]?.version, name);
  await t.notThrowsAsync(run(process.execPath, [join(work, 'node_modules/typescript/bin/tsc'), '-p', work]));
  t.true(readdirSync(join(work, 'dist')).includes('index.js'));
});
