import test from 'ava';
import fc from 'fast-check';
import type { Server } from 'node:http';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { jsonBytes } from '../../src/json-text.js';
import { countLines, MAX_LOG_BYTES } from '../../src/runtime/log-tail.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, IDLE_BOT } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';

// Bots that write what no log reader expects, on TTY and non-TTY containers,
// read through every logs path with `lines` anywhere from 1 to 10000: the
// agent stays up, answers 200 within the contract's bounds, and gives back
// the memory the reads took. (5,000 short lines used to overflow the stack.)

const LINES = 20_000;
const numbered = `i=1; while [ $i -le ${LINES} ]; do echo "line $i"; i=$((i+1)); done; echo done; ${IDLE_BOT}`;
/** 20 lines of 300 KiB, then one line of 6 MiB (longer than an answer may be), then quiet. */
const long =
  "i=0; while [ $i -lt 20 ]; do head -c 307200 /dev/zero | tr '\\0' a; echo; i=$((i+1)); done; " +
  `head -c 6291456 /dev/zero | tr '\\0' z; echo; ${IDLE_BOT}`;
const noNewline = "printf 'first\\nno newline at the end'";
const randomBytes = `head -c 300000 /dev/urandom; echo; echo done; ${IDLE_BOT}`;
const escapes = `printf 'progress\\r50%%\\r100%%\\n\\033[31mred\\033[0m\\n\\ttab\\000nul\\n'; echo done; ${IDLE_BOT}`;
const bothStreams = `i=1; while [ $i -le 3000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; echo done; ${IDLE_BOT}`;

const fixture = new DockerFixture();
let agent: TestAgent;
const bots = new Map<string, string>();

const read = {
  post: (server: Server, botId: string, lines: number) => call(server, '/api/bots/logs', { body: { bot_id: botId, lines } }),
  get: (server: Server, botId: string, lines: number) => call(server, `/api/bots/${botId}/logs?lines=${lines}`),
};

async function logsOf(name: string, lines: number, path: keyof typeof read = 'post'): Promise<string> {
  const reply = await read[path](agent.server, bots.get(name) ?? '', lines);
  if (reply.status !== 200 || typeof reply.body?.logs !== 'string') throw new Error(`${name}: ${reply.status} ${reply.text.slice(0, 200)}`);
  return reply.body.logs;
}

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }));
  const specs: Array<[string, { script: string; tty?: boolean }]> = [
    ['numbered', { script: numbered }],
    ['numbered-tty', { script: numbered, tty: true }],
    ['long', { script: long }],
    ['long-tty', { script: long, tty: true }],
    ['no-newline', { script: noNewline }],
    ['random', { script: randomBytes }],
    ['random-tty', { script: randomBytes, tty: true }],
    ['escapes', { script: escapes }],
    ['escapes-tty', { script: escapes, tty: true }],
    ['both-streams', { script: bothStreams }],
  ];
  for (const [name, spec] of specs) bots.set(name, (await fixture.runBot(spec)).id);
  // Each bot has written all it will write once its last line shows.
  const finished = async (name: string, last: (logs: string) => boolean, lines = 1) =>
    (await eventually(async () => last(await logsOf(name, lines)), 60_000, 200)) || Promise.reject(new Error(`${name} never finished writing`));
  await Promise.all([
    ...['numbered', 'numbered-tty', 'random', 'random-tty', 'escapes', 'escapes-tty'].map((name) =>
      finished(name, (logs) => logs === 'done\n'),
    ),
    // The engine reads stdout and stderr apart: their last lines may land in any order.
    finished('both-streams', (logs) => countLines(Buffer.from(logs)) === 6001, 10_000),
    finished('long', (logs) => logs.endsWith('z\n')),
    finished('long-tty', (logs) => logs.endsWith('z\n')),
    finished('no-newline', (logs) => logs === 'no newline at the end'),
  ]);
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

test('5,000 and 10,000 short lines are answered exactly, framed or on a TTY', async (t) => {
  const expected = (lines: number) =>
    Array.from({ length: lines - 1 }, (_, i) => `line ${LINES - lines + 2 + i}\n`).join('') + 'done\n';
  for (const name of ['numbered', 'numbered-tty']) {
    for (const lines of [5_000, 10_000]) {
      t.is(await logsOf(name, lines), expected(lines), `${name}, ${lines} lines`);
      t.is(await logsOf(name, lines, 'get'), expected(lines), `${name}, ${lines} lines by GET`);
    }
  }
});

test('a line longer than 4 MiB keeps its end; longer answers keep the newest whole lines', async (t) => {
  for (const name of ['long', 'long-tty']) {
    const last = await logsOf(name, 1);
    // Measured as answered: the newline is written `\n`, two bytes.
    t.is(jsonBytes(last), MAX_LOG_BYTES, name);
    t.true(/^z+\n$/.test(last), name);
    // The 6 MiB line is the newest: whatever more is asked, it is all that fits, and it does not fit whole.
    t.is(await logsOf(name, 10_000), last, name);
  }
});

test('a last line with no newline is a line of its own, also once the bot has exited', async (t) => {
  t.is(await logsOf('no-newline', 1), 'no newline at the end');
  t.is(await logsOf('no-newline', 2), 'first\nno newline at the end');
});

test('random bytes answer valid text, non-UTF-8 as U+FFFD', async (t) => {
  for (const name of ['random', 'random-tty']) {
    const logs = await logsOf(name, 10_000);
    t.true(logs.endsWith('\ndone\n'), name);
    t.true(logs.includes('\ufffd'), name);
    t.false(/[\ud800-\udfff]/.test(logs.replace(/[\ud800-\udbff][\udc00-\udfff]/g, '')), `${name}: a lone surrogate`);
  }
});

test('carriage returns, escape codes, tabs and NUL come back as written', async (t) => {
  const written = 'progress\r50%\r100%\n\x1b[31mred\x1b[0m\n\ttab\x00nul\ndone\n';
  t.is(await logsOf('escapes', 100), written);
  // A terminal turns each LF into CRLF; the agent turns it back.
  t.is(await logsOf('escapes-tty', 100), written);
});

test('stdout and stderr come back as one text, each in its own order', async (t) => {
  const lines = (await logsOf('both-streams', 10_000)).trimEnd().split('\n');
  t.is(lines.length, 6001);
  for (const stream of ['out', 'err']) {
    const own = lines.filter((line) => line.startsWith(`${stream} `));
    t.deepEqual(own, Array.from({ length: 3000 }, (_, i) => `${stream} ${i + 1}`), stream);
  }
});

test('any lines from 1 to 10000, any bot, any path: 200 within the bounds, the agent stays up and its memory comes back', async (t) => {
  const gc = globalThis.gc;
  if (!gc) return t.fail('run with --expose-gc (package.json ava.nodeArguments)');
  // Buffers' memory is given back after a collection, once their finalizers ran: collect, let them run, collect.
  const used = async () => {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    return heapUsed + arrayBuffers;
  };
  const names = [...bots.keys()];
  const property = fc.asyncProperty(
    fc.constantFrom(...names),
    fc.oneof(fc.integer({ min: 1, max: 10_000 }), fc.constantFrom(1, 2, 99, 100, 101, 4_999, 5_000, 5_001, 9_999, 10_000)),
    fc.constantFrom<keyof typeof read>('post', 'get'),
    async (name, lines, path) => {
      const logs = await logsOf(name, lines, path);
      if (Buffer.byteLength(logs) > MAX_LOG_BYTES) throw new Error(`${name}: ${Buffer.byteLength(logs)} bytes`);
      if (countLines(Buffer.from(logs)) > lines) throw new Error(`${name}: more than ${lines} lines`);
    },
  );
  await fc.assert(property, { numRuns: 40 });
  const before = await used();
  await fc.assert(property, { numRuns: 60 });
  const grown = (await used()) - before;
  t.true(grown < 16 * 1024 * 1024, `memory grew by ${(grown / 1048576).toFixed(1)} MiB and stayed`);
  t.is((await call(agent.server, '/healthz')).status, 200);
});
