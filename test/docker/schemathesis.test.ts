import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import { listen } from '../../src/http/listen.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';

// An OpenAPI fuzzer nobody here wrote (schemathesis, from PyPI) against the agent
// on the real engine, with real bots among the ids it tries: no 5xx, and every
// answer, status, content type and body, as /openapi.json says.
const run = promisify(execFile);
const fixture = new DockerFixture();
const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
const TOKEN = 'schemathesis-admin-token-0123456789abcdef';
let server: Server;
let network: string;
let work: string;

test.before(async () => {
  await fixture.ready();
  network = (await fixture.network()).name;
  const { app } = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network, agentUrl: 'http://agent:8000' }),
    // Budgets wide enough that the fuzzer meets the answers it came for, not only 429s.
    config: { ...TEST_APP_CONFIG, adminToken: TOKEN, rateLimit: 100_000, readRate: 100_000, restartTimeoutMs: 20_000 },
    logger: pino({ level: 'silent' }),
  });
  server = await listen(app, '127.0.0.1', 0);
  work = await mkdtemp(join(tmpdir(), 'bot-agent-schemathesis-'));
});

test.after.always(async () => {
  server?.close();
  // Bots the fuzzer created with the test image joined this file's network.
  const made = await fixture.docker.listContainers({ all: true, filters: { network: [network], label: [BOT_LABEL] } });
  await Promise.all(made.map((c) => fixture.docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  await driver.close();
  await fixture.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

/** The `st` command of the cached virtual environment (made on first use, about 10 s). */
async function schemathesis(): Promise<string> {
  const { stdout } = await run('bash', ['scripts/schemathesis.sh'], { maxBuffer: 1 << 20 });
  return stdout.trim().split('\n').at(-1) ?? '';
}

const tomlString = (value: string) => JSON.stringify(value);
const tomlList = (values: string[]) => `[${values.map(tomlString).join(', ')}]`;

test('schemathesis finds no 5xx and no answer the published schema does not allow', async (t) => {
  const st = await schemathesis();
  const owners = ['user_1', 'user_2'];
  // A stop that comes before a just-started bot's shell has set its trap waits out the bot's grace period
  // (PID 1 ignores a signal it has no handler for): 2 s, not the engine's 10, keeps every answer well
  // within the fuzzer's response-time check.
  const bots = await Promise.all([
    fixture.runBot({ owner: owners[0], stopTimeout: 2 }),
    fixture.runBot({ owner: owners[1], stopTimeout: 2, script: `trap 'exit 0' TERM; i=0; while :; do i=$((i+1)); echo "line $i"; printf '\\001\\033[31m\\n'; sleep 1 & wait $!; done` }),
    fixture.runBot({ owner: owners[0], stopTimeout: 2, start: false }),
  ]);
  const ids = bots.map((bot) => bot.id);
  const config = join(work, 'schemathesis.toml');
  // Real ids and owners half of the time; the rest is the fuzzer's own. DELETE
  // would remove the real bots at once, so it only tries ids no bot has.
  await writeFile(
    config,
    `
request-timeout = 30.0
max-stream-events = 2
[generation]
max-examples = 30
# A body past 16 KiB is refused before it is read: 413 is as much a refusal as 400.
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
[dictionaries.bots]
values = ${tomlList(ids)}
[dictionaries.owners]
values = ${tomlList(owners)}
[dictionaries.images]
values = ${tomlList([TEST_IMAGE])}
[dictionaries.absent]
values = ${tomlList(['bot_1_1_gone', 'bot_2_2_absent'])}
[parameters]
"path.bot_id" = { dictionary = "bots", probability = 0.5 }
"body.bot_id" = { dictionary = "bots", probability = 0.5 }
"header.X-Bot-ID" = { dictionary = "bots", probability = 0.5 }
"body.user_id" = { dictionary = "owners", probability = 0.5 }
"query.user_id" = { dictionary = "owners", probability = 0.5 }
"body.image" = { dictionary = "images", probability = 0.3 }
[[operations]]
include-method = "DELETE"
parameters = { "path.bot_id" = { dictionary = "absent", probability = 1.0 } }
# Whether the engine holds the image, and how many CPUs it has, is no property a schema can state:
# a create the schema allows may be a 400 that says which.
[[operations]]
include-path = "/api/admin/bots"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "403", "404", "409", "429"]
# Self restart from loopback names its bot in X-Bot-ID; without one it is the 400 the contract says
# (the header is optional for bots, whose address names them).
[[operations]]
include-path = "/api/bots/self/restart"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "403", "404", "409", "429"]
`,
  );
  const { port } = server.address() as AddressInfo;
  const report = join(work, 'report.json');
  const result = await run(
    st,
    [
      '--config-file',
      config,
      'run',
      `http://127.0.0.1:${port}/openapi.json`,
      '--checks',
      'all',
      '--max-time',
      '90',
      '--workers',
      '2',
      '--seed',
      String(Date.now() % 1_000_000),
      '--report',
      'json',
      '--report-json-path',
      report,
    ],
    // In its own folder: schemathesis keeps its example database in the working directory.
    { cwd: work, maxBuffer: 64 << 20, env: { ...process.env, NO_COLOR: '1' }, timeout: 240_000 },
  ).catch((err: { code?: number; stdout?: string; stderr?: string }) => err);
  const output = `${result.stdout ?? ''}\n${result.stderr ?? ''}`;
  if (process.env.SCHEMATHESIS_OUT) await writeFile(process.env.SCHEMATHESIS_OUT, output);
  t.log(output.split('\n').filter((line) => /passed|failed|error|seed|Seed/i.test(line)).slice(-12).join('\n'));
  const summary = JSON.parse(await readFile(report, 'utf8')) as { failures: unknown[]; test_cases: { generated: number } };
  t.deepEqual(summary.failures, [], output.slice(-20_000));
  t.deepEqual(errorsOf(output).filter((error) => !TOOL_BUG.test(error)), [], 'no request failed (a time-out is a hang)');
  t.true(summary.test_cases.generated > 200, `only ${summary.test_cases.generated} requests: the run says little`);
});

/**
 * A crash inside the judge, not an answer of the agent: hypothesis describes a strategy's lambda by
 * parsing its source, which CPython 3.11 (this machine's) sometimes refuses at depth.
 */
const TOOL_BUG = /AST constructor recursion depth mismatch/;

/** The blocks of the report's ERRORS section, one an operation. */
function errorsOf(output: string): string[] {
  const section = /={3,} ERRORS ={3,}\n([\s\S]*?)(?:\n={3,} [A-Z]+ ={3,}|$)/.exec(output)?.[1] ?? '';
  return section.split(/^_{3,} /m).map((block) => block.trim()).filter((block) => block.length > 0);
}
