import { EventEmitter } from 'node:events';
import test from 'ava';
import type { V1Pod } from '@kubernetes/client-node';
import type { RunEnd, RunObserver } from '../../src/runtime/driver.js';
import type { KubeObjectCache } from '../../src/runtime/kubernetes/kube-object-cache.js';
import { KubeRunWatcher } from '../../src/runtime/kubernetes/kube-runs.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';

const BOT = 'bot_1_1_twoviews';
const STARTED = '2026-11-26T08:00:00Z';

function pod(state: Record<string, unknown>, deleting = false): V1Pod {
  return {
    metadata: { name: 'bot-pod', uid: 'pod-uid-1', labels: { [BOT_LABEL]: BOT }, ...(deleting ? { deletionTimestamp: new Date() } : {}) },
    status: { containerStatuses: [{ name: 'bot', image: 'x', imageID: 'x', ready: false, restartCount: 0, state }] },
  } as V1Pod;
}

/** One agent's watch of the pods, reporting the run ends it saw. */
function agent(ends: RunEnd[]): EventEmitter {
  const observer: RunObserver = {
    started: async () => undefined,
    ended: async (run) => void ends.push(run),
    lastEnd: async () => undefined,
  };
  const pods = new EventEmitter();
  new KubeRunWatcher(observer, async () => 'last line\n', () => 'bot', () => undefined).watch(pods as unknown as KubeObjectCache<V1Pod>);
  return pods;
}

test("one run of a deleted pod is one key, whether an agent saw its container end or only the pod's deletion (its watch re-listed meanwhile)", async (t) => {
  const ends: RunEnd[] = [];
  const running = pod({ running: { startedAt: new Date(STARTED) } });
  // The first agent saw everything: the run, its end during the deletion, then the deletion.
  const one = agent(ends);
  one.emit('add', running);
  const ended = pod({ terminated: { startedAt: new Date(STARTED), finishedAt: new Date(), exitCode: 0 } }, true);
  one.emit('update', ended);
  one.emit('delete', ended);
  // The other's watch re-listed while the pod was deleted: it last saw the run, then only its deletion.
  const other = agent(ends);
  other.emit('add', running);
  other.emit('delete', pod({ running: { startedAt: new Date(STARTED) } }, true));
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(ends.length, 2, 'each agent reports the end it saw');
  t.is(ends[0]?.key, ends[1]?.key, 'under one key: the store keeps it once');
  t.is(ends[0]?.key, `kube:pod-uid-1:run:${new Date(STARTED).toISOString()}`);
});

test("a run's lines read after the kubelet restarted its container are the previous container's, not the new run's", async (t) => {
  const ends: RunEnd[] = [];
  let restarted = false;
  let release = (): void => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const observer: RunObserver = { started: async () => undefined, ended: async (run) => void ends.push(run), lastEnd: async () => undefined };
  const pods = new EventEmitter();
  // The kubelet's logs: the current container's are the second run's once it restarted, its previous the first's.
  const reader = async (_pod: string, _container: string | undefined, previous: boolean) => {
    await gate;
    return previous || !restarted ? 'first run\n' : 'second run\n';
  };
  new KubeRunWatcher(observer, reader, () => 'bot', () => undefined).watch(pods as unknown as KubeObjectCache<V1Pod>);
  const first = { startedAt: new Date(STARTED), finishedAt: new Date(), exitCode: 3 };
  pods.emit('add', pod({ running: { startedAt: new Date(STARTED) } }));
  pods.emit('update', pod({ terminated: first }));
  // Before the end's lines are read, the kubelet restarts the container.
  const second = pod({ running: { startedAt: new Date() } });
  second.status!.containerStatuses![0]!.restartCount = 1;
  second.status!.containerStatuses![0]!.lastState = { terminated: first };
  restarted = true;
  pods.emit('update', second);
  release();
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(ends.length, 1, 'one run, one end');
  t.is(ends[0]?.logs, 'first run\n');
});

test('a SIGKILL the kubelet first calls an Error is recorded OOM-killed when its next view of the run says OOMKilled (containerd learned it late)', async (t) => {
  const ends: RunEnd[] = [];
  const pods = agent(ends);
  const run = { startedAt: new Date(STARTED), finishedAt: new Date(), exitCode: 137, signal: 9 };
  pods.emit('add', pod({ running: { startedAt: new Date(STARTED) } }));
  pods.emit('update', pod({ terminated: { ...run, reason: 'Error' } }));
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(ends.length, 0, 'the end waits for its reason');
  const restarted = pod({ running: { startedAt: new Date() } });
  restarted.status!.containerStatuses![0]!.restartCount = 1;
  restarted.status!.containerStatuses![0]!.lastState = { terminated: { ...run, reason: 'OOMKilled' } };
  pods.emit('update', restarted);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(ends.length, 1, 'one run, one end');
  t.like(ends[0], { oomKilled: true, exitCode: 137, requested: false });
});

test("a SIGKILL's end waits for its reason only while a later view can come: the pod's deletion records it at once, as seen", async (t) => {
  const ends: RunEnd[] = [];
  const pods = agent(ends);
  const killed = pod({ terminated: { startedAt: new Date(STARTED), finishedAt: new Date(), exitCode: 137, reason: 'Error' } });
  pods.emit('add', killed);
  pods.emit('delete', killed);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(ends.length, 1);
  t.like(ends[0], { oomKilled: false, exitCode: 137 });
});

test('an end that is not a SIGKILL, or that the kubelet already calls OOMKilled, does not wait', async (t) => {
  const ends: RunEnd[] = [];
  const pods = agent(ends);
  pods.emit('add', pod({ terminated: { startedAt: new Date(STARTED), finishedAt: new Date(), exitCode: 137, reason: 'OOMKilled' } }));
  const other = pod({ terminated: { startedAt: new Date(), finishedAt: new Date(), exitCode: 1, reason: 'Error' } });
  other.metadata!.uid = 'pod-uid-2';
  pods.emit('add', other);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.deepEqual(ends.map((end) => [end.exitCode, end.oomKilled]), [[137, true], [1, false]]);
});

test("the kubelet's events are asked of an end only where the container has a liveness probe: no other end can be one for health", async (t) => {
  const ends: RunEnd[] = [];
  const asked: string[] = [];
  const observer: RunObserver = { started: async () => undefined, ended: async (run) => void ends.push(run), lastEnd: async () => undefined };
  const pods = new EventEmitter();
  const livenessKills = async (name: string) => {
    asked.push(name);
    return { check: 'exec' as const, output: 'no answer' };
  };
  new KubeRunWatcher(observer, async () => '', () => 'bot', () => undefined, livenessKills).watch(pods as unknown as KubeObjectCache<V1Pod>);
  const crashed = { terminated: { startedAt: new Date(STARTED), finishedAt: new Date(), exitCode: 1, reason: 'Error' } };
  const plain = pod(crashed);
  plain.spec = { containers: [{ name: 'bot', image: 'x' }] };
  pods.emit('add', plain);
  const probed = pod(crashed);
  probed.metadata = { ...probed.metadata, name: 'probed-pod', uid: 'pod-uid-2' };
  probed.spec = { containers: [{ name: 'bot', image: 'x', livenessProbe: { exec: { command: ['true'] } } }] };
  pods.emit('add', probed);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.deepEqual(asked, ['probed-pod']);
  t.deepEqual(ends.map((end) => end.unhealthy), [undefined, { check: 'exec', output: 'no answer' }]);
});
