import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import type { RunEnd, RunStart } from '../../src/runtime/driver.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { SocketProxy } from '../helpers/socket-proxy.js';

// The engine replays to a new subscription only the events it still holds, its last 256 or so: a busy engine
// (health checks, other bots, networks) sends more than that in seconds while the agent's stream is down.

const fixture = new DockerFixture();

test.before(() => fixture.ready());
test.after.always(() => fixture.cleanup());

test('a run that ended while the event stream was down, past what the engine replays, still has its end and the next run its start', async (t) => {
  const proxy = new SocketProxy();
  await proxy.start();
  t.teardown(() => proxy.close());
  const driver = createDockerDriver({ dockerHost: proxy.dockerHost });
  t.teardown(() => driver.close());
  const started: RunStart[] = [];
  const ended: RunEnd[] = [];
  driver.observeRuns({ started: async (run) => void started.push(run), ended: async (run) => void ended.push(run), lastEnd: async () => undefined }, undefined);
  const bot = await fixture.runBot({ script: 'echo up; trap "exit 7" TERM; while :; do sleep 0.2 & wait $!; done' });
  const firstStart = new Date(await fixture.startedAt(bot)).getTime();
  t.true(await eventually(() => started.some((run) => run.botId === bot.id)), 'the first start was seen');
  // Too short a run for the listing after the outage to tell the next one from it by its uptime (whole seconds).

  /** The engine's events while the stream is down: `change`, then (`flood`) more than the engine keeps (image tags made and removed). */
  const outage = async (change: () => Promise<unknown>, flood = true): Promise<void> => {
    proxy.cut();
    await change();
    const image = fixture.docker.getImage(TEST_IMAGE);
    for (let i = 0; flood && i < 200; i += 1) {
      await image.tag({ repo: 'bot-agent-flood', tag: `t${process.pid}-${i}` });
      await fixture.docker.getImage(`bot-agent-flood:t${process.pid}-${i}`).remove();
    }
    proxy.restore();
  };
  const of = <T extends { botId: string }>(runs: T[]): T[] => runs.filter((run) => run.botId === bot.id);

  // Restarted: the engine, running it again, no longer says how the run before ended.
  await outage(() => bot.container.restart({ t: 5 }));
  const secondStart = new Date(await fixture.startedAt(bot)).getTime();
  t.true(await eventually(() => of(ended).length === 1, 30_000), "the run's end was recorded");
  t.like(of(ended)[0], { exitCode: null, oomKilled: false });
  t.is(of(ended)[0]!.startedAt?.getTime(), firstStart);
  t.true(of(ended)[0]!.logs.includes('up'), of(ended)[0]!.logs);
  t.true(await eventually(() => of(started).length === 2, 30_000), "the next run's start was recorded");
  t.is(of(started)[1]!.startedAt.getTime(), secondStart);

  // Stopped: its exit code is the engine's to say.
  await outage(() => bot.container.stop({ t: 5 }));
  t.true(await eventually(() => of(ended).length === 2, 30_000), "the second run's end was recorded");
  t.like(of(ended)[1], { exitCode: 7, oomKilled: false });
  t.is(of(ended)[1]!.startedAt?.getTime(), secondStart);

  // Started again in an outage the replay covers: its events say it, and nothing is recorded twice.
  await outage(() => bot.container.start(), false);
  const thirdStart = new Date(await fixture.startedAt(bot)).getTime();
  t.true(await eventually(() => of(started).length === 3, 30_000), "the third run's start was recorded");
  t.is(of(started)[2]!.startedAt.getTime(), thirdStart);
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  t.is(of(ended).length, 2, 'each run once');
  t.is(of(started).length, 3, 'each start once');
});
