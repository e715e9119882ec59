import test from 'ava';
import { perRequest, stagesOf } from '../../scripts/bench-profile.js';
import type { CpuProfile } from '../../scripts/bench-profile.js';

const frame = (id: number, functionName: string, url: string, children: number[] = []) => ({ id, callFrame: { functionName, url }, children });

/** root > koa's respond > node:_http_outgoing > writeUtf8String; root > the agent's caller.js > node:events; root > the engine's HTTP client; GC; idle. */
const profile: CpuProfile = {
  nodes: [
    frame(1, '(root)', '', [2, 5, 7, 8, 9, 10]),
    frame(2, 'respond', 'file:///app/node_modules/koa/lib/application.js', [3]),
    frame(3, 'end', 'node:_http_outgoing', [4]),
    frame(4, 'writeUtf8String', ''),
    frame(5, 'identifyCaller', 'file:///app/dist/http/caller.js', [6]),
    frame(6, 'emit', 'node:events'),
    frame(7, 'socketOnData', 'node:_http_client'),
    frame(8, '(garbage collector)', ''),
    frame(9, '(idle)', ''),
    frame(10, 'processTicksAndRejections', 'node:internal/process/task_queues'),
  ],
  startTime: 1_000,
  endTime: 2_000,
  // One sample of each leaf, 10 µs apart; the last two samples fall after the window.
  samples: [4, 6, 7, 8, 9, 10, 3, 4],
  timeDeltas: [10, 10, 10, 10, 10, 10, 10, 10],
};

test("each sample counts in the stage of its nearest frame of a package or of the agent's code", (t) => {
  const stages = stagesOf(profile);
  t.is(stages.get('socket writes (the kernel)'), 20);
  t.is(stages.get('identity (who calls)'), 10);
  t.is(stages.get('driver (stats, logs, status; its HTTP client)'), 10);
  t.is(stages.get('garbage collection'), 10);
  t.is(stages.get('node:http, streams, event loop'), 10);
  t.is(stages.get('koa & @koa/router'), 10);
  t.false([...stages.values()].includes(NaN));
  // Idle is no stage.
  t.is([...stages.values()].reduce((sum, us) => sum + us, 0), 70);
});

test('only the samples within the window count, and per request they are shared out', (t) => {
  // Samples are at 1010, 1020, ... 1080: the window ends at the sixth.
  const stages = stagesOf(profile, 1_000, 1_060);
  t.is(stages.get('socket writes (the kernel)'), 10);
  t.is(stages.get('koa & @koa/router'), undefined);
  const shared = perRequest(stages, 4);
  t.is(shared['identity (who calls)'], 2.5);
  t.is(shared['koa & @koa/router'], 0);
});
