import test from 'ava';
import { writeFileSync } from 'node:fs';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { readLogFile } from '../../src/runtime/docker/docker-log-file.js';
import { readLogs } from '../../src/runtime/docker/docker-logs.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { SocketProxy } from '../helpers/socket-proxy.js';

// A logs read answered from the engine's json-file log (docs/docker.md) must be the engine's own answer, to the byte.
const fixture = new DockerFixture();

test.before(async () => {
  await fixture.ready();
});

test.after.always(async () => {
  await fixture.cleanup();
});

// Both outputs, a line of 40,000 bytes (three entries of the engine's), control and multibyte characters, a last line
// with no end (the engine keeps it until the bot ends); a pause between writes so that the engine stores them in that order.
const WRITER =
  'for i in $(seq 1 40); do echo "out $i é ✓"; usleep 20000; echo "err $i" >&2; usleep 20000; done; ' +
  "head -c 40000 /dev/zero | tr '\\0' x; echo; printf 'bell \\a tab \\t\\n'; usleep 20000; printf 'no end'";

for (const tty of [false, true]) {
  test(`the file and the engine answer the same text${tty ? ', on a terminal' : ''}`, async (t) => {
    const bot = await fixture.runBot({ script: WRITER, tty });
    const info = await fixture.docker.getContainer(bot.id).inspect();
    t.regex(info.LogPath, /-json\.log$/);
    t.true(await eventually(async () => (await readLogs(fixture.docker, info.Id, tty, 1)) === 'no end'), 'the bot never wrote its last line');
    for (const lines of [1, 2, 3, 5, 60, 10_000]) {
      const engine = await readLogs(fixture.docker, info.Id, tty, lines);
      t.is(await readLogFile(info.LogPath, tty, lines), engine, `${lines} lines`);
    }
    const three = await readLogFile(info.LogPath, tty, 3);
    t.true(three?.includes('x'.repeat(40_000)), `the last 3 lines: ${three === undefined ? 'none' : `${three.length} characters, ${JSON.stringify(three.slice(0, 80))}...${JSON.stringify(three.slice(-80))}`}`);
  });
}

test('the driver reads the file without the engine, and the engine where the file cannot answer alone', async (t) => {
  const proxy = new SocketProxy();
  await proxy.start();
  t.teardown(() => proxy.close());
  const driver = createDockerDriver({ dockerHost: `unix://${proxy.path}` });
  const bot = await fixture.runBot({ script: 'seq 1 30; exec sleep 1000' });
  const { LogPath } = await fixture.docker.getContainer(bot.id).inspect();
  t.true(await eventually(async () => (await driver.logs(bot.id, 1)) === '30\n'));
  const logsCalls = (): number => proxy.requests.filter((line) => /\/containers\/[^/]+\/logs\?/.test(line)).length;
  const before = logsCalls();
  t.is(await driver.logs(bot.id, 3), '28\n29\n30\n');
  t.is(await driver.logs(bot.id, 100), `${Array.from({ length: 30 }, (_, i) => i + 1).join('\n')}\n`);
  t.is(logsCalls(), before, 'the engine was asked for the logs');
  // A rotated log: the lines before the file's first are the engine's to find.
  writeFileSync(`${LogPath}.1`, '');
  t.is(await driver.logs(bot.id, 100), `${Array.from({ length: 30 }, (_, i) => i + 1).join('\n')}\n`);
  t.is(logsCalls(), before + 1);
  t.is(await driver.logs(bot.id, 2), '29\n30\n');
  t.is(logsCalls(), before + 1, 'the last file holds the lines: no engine call');
});
