import { randomUUID } from 'node:crypto';
import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import type { RunEnd, RunObserver, RunStart } from '../../src/runtime/driver.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { SocketProxy } from '../helpers/socket-proxy.js';

// The engine replays to a new subscription only the events it still holds, its last 256 or so: a busy engine
// (health checks, other bots, networks) sends more than that in seconds while the agent's stream is down.

const fixture = new DockerFixture();

test.before(() => fixture.ready());
test.after.always(() => fixture.cleanup());

/** More events than the engine keeps: 200 image tags, each made and removed. */
async function moreEventsThanKept(): Promise<void> {
  const image = fixture.docker.getImage(TEST_IMAGE);
  // A tag of this call's own: the file's tests flood at the same time, and one must not remove the other's.
  const own = randomUUID().slice(0, 8);
  for (let i = 0; i < 200; i += 1) {
    await image.tag({ repo: 'bot-agent-flood', tag: `t${own}-${i}` });
    await fixture.docker.getImage(`bot-agent-flood:t${own}-${i}`).remove();
  }
}

/** What agents sharing a database keep of runs: each under its key once, as the history does (docs/api.md §11). */
function sharedHistory() {
  const started = new Map<string, RunStart>();
  const ended = new Map<string, RunEnd>();
  const observer: RunObserver = {
    started: async (run) => void started.set(run.key, run),
    ended: async (run) => void ended.set(run.key, run),
    lastEnd: async (botId) => {
      const ats = [...ended.values()].filter((run) => run.botId === botId).map((run) => run.at.getTime());
      return ats.length === 0 ? undefined : new Date(Math.max(...ats));
    },
  };
  return { observer, started: (botId: string) => [...started.values()].filter((run) => run.botId === botId), ended: (botId: string) => [...ended.values()].filter((run) => run.botId === botId) };
}

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

  /** The engine's events while the stream is down: `change`, then (`flood`) more than the engine keeps. */
  const outage = async (change: () => Promise<unknown>, flood = true): Promise<void> => {
    proxy.cut();
    await change();
    if (flood) await moreEventsThanKept();
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

test('two agents over one engine, one of whose streams was down past the replay: each run is recorded once, as the other heard it', async (t) => {
  const proxy = new SocketProxy();
  await proxy.start();
  t.teardown(() => proxy.close());
  const history = sharedHistory();
  const cutOff = createDockerDriver({ dockerHost: proxy.dockerHost });
  const heard = createDockerDriver({ dockerHost: fixture.dockerHost });
  t.teardown(() => cutOff.close());
  t.teardown(() => heard.close());
  cutOff.observeRuns(history.observer, undefined);
  heard.observeRuns(history.observer, undefined);
  const bot = await fixture.runBot({ script: 'echo up; trap "exit 7" TERM; while :; do sleep 0.2 & wait $!; done' });
  t.true(await eventually(() => history.started(bot.id).length === 1), 'the first start was kept');

  proxy.cut();
  await bot.container.restart({ t: 5 });
  t.true(await eventually(() => history.ended(bot.id).length === 1 && history.started(bot.id).length === 2, 30_000), 'the other agent kept the end and the start');
  await moreEventsThanKept();
  const before = proxy.requests.length;
  proxy.restore();
  // The cut-off agent has listed the engine again, and looked at the bot.
  t.true(await eventually(() => proxy.requests.slice(before).some((line) => line.includes(`/containers/${bot.container.id}/json`)), 30_000));
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  t.is(history.ended(bot.id).length, 1, 'the end once');
  t.is(history.started(bot.id).length, 2, 'each start once');

  // Both agents then hear its next end, under the same key.
  await bot.container.stop({ t: 5 });
  t.true(await eventually(() => history.ended(bot.id).length === 2, 30_000));
  t.like(history.ended(bot.id)[1], { exitCode: 7 });
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  t.is(history.ended(bot.id).length, 2);
});
