import test from 'ava';
import type { CoreV1Api, CoreV1Event, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { namesOf, podEventsOf, pullRefusalOf, pullState, pullWordsOf, RefusalJudge, refusedPullsOf } from '../../src/runtime/kubernetes/kube-pull-state.js';

// A create on Kubernetes waits for its image only while the kubelet pulls it (docs/api.md §14): a pod the
// scheduler has no room for, or one past the pull for another reason, ends the wait at once (it waited out
// AGENT_PULL_TIMEOUT_S, 5 minutes, before).
const onNode = (status: Partial<V1ContainerStatus>): V1Pod => ({
  spec: { nodeName: 'node-1', containers: [] },
  status: { phase: 'Pending', containerStatuses: [{ name: 'bot', image: 'bot:1', imageID: '', ready: false, restartCount: 0, ...status }] },
});
const waiting = (reason: string, message?: string) => onNode({ state: { waiting: { reason, message } } });
const unscheduled = (reason: string): V1Pod => ({
  spec: { containers: [] },
  status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason, message: '0/1 nodes are available: 1 Insufficient memory.' }] },
});

test('the image is there once a container names its ID, ran, or waits for something past the pull', (t) => {
  t.is(pullState([onNode({ imageID: 'docker.io/library/bot@sha256:ab' })]).kind, 'pulled');
  t.is(pullState([onNode({ state: { running: {} } })]).kind, 'pulled');
  t.is(pullState([onNode({ lastState: { terminated: { exitCode: 1 } } })]).kind, 'pulled');
  for (const reason of ['CreateContainerConfigError', 'CreateContainerError', 'RunContainerError', 'CrashLoopBackOff']) {
    t.is(pullState([waiting(reason)]).kind, 'pulled', reason);
  }
});

test('while the kubelet pulls, or before the pod is made or placed, the create waits', (t) => {
  t.is(pullState([]).kind, 'pulling');
  t.is(pullState([waiting('ContainerCreating')]).kind, 'pulling');
  t.is(pullState([onNode({})]).kind, 'pulling');
  t.is(pullState([{ spec: { containers: [] }, status: { phase: 'Pending' } }]).kind, 'pulling');
  t.is(pullState([unscheduled('SchedulerError')]).kind, 'pulling');
});

test('a pod the scheduler has no room for is not waited for; one pod of two placed still is', (t) => {
  t.is(pullState([unscheduled('Unschedulable')]).kind, 'unschedulable');
  t.is(pullState([unscheduled('Unschedulable'), waiting('ContainerCreating')]).kind, 'pulling');
});

test("a pull the kubelet cannot make is a failure, in the kubelet's words", (t) => {
  t.deepEqual(pullState([waiting('ErrImagePull', 'Failed to pull image "bot:1": not found')]), {
    kind: 'failed',
    reason: 'ErrImagePull',
    message: 'Failed to pull image "bot:1": not found',
  });
  t.like(pullState([waiting('ImagePullBackOff')]), { kind: 'failed', reason: 'ImagePullBackOff' });
});

// Under load the kubelet's Secret cache may not yet hold a Secret made just before the pod: it says so, pulls
// without the login, and the registry refuses. That refusal is not the registry's verdict on the login (seen
// on the real cluster: a create with a good login answered 403).
const pod: V1Pod = { metadata: { name: 'bot-1-abc' } };
const event = (reason: string, message: string, atS: number, name = 'bot-1-abc'): CoreV1Event => ({
  metadata: {},
  involvedObject: { kind: 'Pod', name },
  reason,
  message,
  lastTimestamp: new Date(1_700_000_000_000 + atS * 1000),
});
const lacked = (secrets: string, atS: number, name?: string) =>
  event('FailedToRetrieveImagePullSecret', `Unable to retrieve some image pull secrets (${secrets}); attempting to pull the image may not succeed.`, atS, name);
const refused = (atS: number, count = 1) => ({ ...event('Failed', 'Failed to pull image "r/bot:1": 401 Unauthorized', atS), count });
/** A CoreV1Api whose event lists answer as the API server's: only the events each field selector names. */
const eventsApi = (events: () => CoreV1Event[], selectors: string[] = []) =>
  ({
    listNamespacedEvent: async ({ fieldSelector = '' }: { fieldSelector?: string }) => {
      selectors.push(fieldSelector);
      const wanted = Object.fromEntries(fieldSelector.split(',').map((term) => term.split('=') as [string, string]));
      const field = (item: CoreV1Event, path: string) => path.split('.').reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], item);
      return { items: events().filter((item) => Object.entries(wanted).every(([path, value]) => field(item, path) === value)) };
    },
  }) as unknown as CoreV1Api;
const ownSecret = (secret: string) => secret === 'bot-1-pull';
const judge = (events: CoreV1Event[]) => pullRefusalOf(events, ownSecret) === 'lacked';

test("a refusal right after the kubelet could not read the create's own login is the kubelet's miss, waited out", (t) => {
  t.true(judge([lacked('bot-1-pull', 10), refused(10)]));
  t.true(judge([lacked('bot-1-pull', 10), refused(11)]), 'the refusal stamped the second after its miss (seen on the real cluster)');
  t.true(judge([lacked('bot-1-pull', 10)]), 'its refusal not yet posted');
  t.true(judge([refused(10), lacked('bot-1-pull', 21)]), 'missed again before the next pull');
  t.true(judge([lacked('', 10), refused(10)]), "a miss naming no Secret (the kubelet's cache timed out)");
});

test("a refusal with the login read, or of a Secret the operator named, is the registry's verdict", (t) => {
  t.false(judge([refused(10)]));
  t.false(judge([lacked('bot-1-pull', 10), refused(21)]), 'the pull after the back-off had the login');
  t.false(judge([lacked('registry-login, bot-1-pull', 10), refused(10)]), 'a configured Secret that is not there');
});

test('a refusal whose events are not posted yet is waited for 10 s, not 2: the miss may come with them', (t) => {
  let nowMs = 0;
  let events: CoreV1Event[] = [];
  const judge = new RefusalJudge(ownSecret, () => nowMs);
  t.false(judge.final(events), 'seen only now');
  nowMs = 5_000;
  t.false(judge.final(events), 'nothing posted after 5 s');
  events = [lacked('bot-1-pull', 10), refused(10)];
  nowMs = 6_000;
  t.false(judge.final(events), 'the miss, posted late');
  events = [];
  const unposted = new RefusalJudge(ownSecret, () => nowMs);
  nowMs = 0;
  t.false(unposted.final(events));
  nowMs = 10_000;
  t.true(unposted.final(events), 'a kubelet that never posts them: judged all the same');
});

test('a refusal posted late is judged 2 s after its second pull is posted, not at once', (t) => {
  let nowMs = 0;
  let events: CoreV1Event[] = [];
  const judge = new RefusalJudge(ownSecret, () => nowMs);
  t.false(judge.final(events));
  events = [refused(10, 2)];
  nowMs = 5_000;
  t.false(judge.final(events), 'posted only now');
  nowMs = 7_000;
  t.true(judge.final(events));
});

// The kubelet posts its events a moment after the pod's status says ErrImagePull: a refusal is judged once two
// pulls were refused and the second has been seen for 2 s without a miss of the agent's own login; a miss starts
// the watch again for the next pull. The first pull may go without the login and no miss be posted (a CI run).
test('a refusal is final once a second pull is refused and seen for 2 s with no miss of the login; a miss waits for the next pull', (t) => {
  let nowMs = 0;
  let events: CoreV1Event[] = [refused(10)];
  const judge = new RefusalJudge(ownSecret, () => nowMs);
  t.false(judge.final(events), 'seen only now');
  nowMs = 5_000;
  t.false(judge.final(events), 'one pull refused: its next is waited for');
  events = [lacked('bot-1-pull', 10), refused(10)];
  nowMs = 5_500;
  t.false(judge.final(events), 'its miss posted late');
  events = [lacked('bot-1-pull', 10), refused(22)];
  nowMs = 13_000;
  t.false(judge.final(events), 'the next pull, with the login, refused: watched afresh');
  events = [lacked('bot-1-pull', 10), refused(34, 2)];
  nowMs = 24_000;
  t.false(judge.final(events), 'refused twice: seen only now');
  nowMs = 26_000;
  t.true(judge.final(events));
});

test("a final refusal is said in the last refused pull's words: the second pull's \"not found\" where the first said \"unauthorized\"", (t) => {
  let nowMs = 0;
  const notFound = { ...event('Failed', 'Failed to pull image "r/bot:1": not found', 22), count: 1 };
  const events = [refused(10), notFound];
  const judge = new RefusalJudge(ownSecret, () => nowMs);
  t.is(judge.verdict(events, 'from the status'), undefined, 'seen only now');
  nowMs = 2_000;
  t.is(judge.verdict(events, 'from the status'), 'Failed to pull image "r/bot:1": not found');
  const unposted = new RefusalJudge(ownSecret, () => nowMs);
  t.is(unposted.verdict([], 'from the status'), undefined);
  nowMs = 12_000;
  t.is(unposted.verdict([], 'from the status'), 'from the status', 'no pull posted: the status says it');
});

test('one refused pull with no second posted is judged after 30 s (a kubelet that drops its repeated events)', (t) => {
  let nowMs = 0;
  const events = [refused(10)];
  const judge = new RefusalJudge(ownSecret, () => nowMs);
  t.false(judge.final(events));
  nowMs = 29_000;
  t.false(judge.final(events));
  nowMs = 30_000;
  t.true(judge.final(events));
});

test('pulls refused are counted by their events and their repeats', (t) => {
  const notFound = event('Failed', 'Failed to pull image "r/bot:1": not found', 30);
  t.is(refusedPullsOf([refused(10), notFound, event('Failed', 'Error: ImagePullBackOff', 40)]), 2, 'a back-off is no pull');
  t.is(refusedPullsOf([refused(10, 3)]), 3);
  t.is(refusedPullsOf([]), 0);
});

test("a pull wait lists each pod's own events, never every event of the namespace", async (t) => {
  const selectors: string[] = [];
  const second: V1Pod = { metadata: { name: 'bot-1-def' } };
  const events = [refused(10), lacked('bot-1-pull', 10, 'bot-1-def'), lacked('bot-1-pull', 10, 'bot-9-xyz')];
  const listed = await podEventsOf(eventsApi(() => events, selectors), 'bots', namesOf([pod, second, pod]));
  t.deepEqual(selectors.sort(), ['involvedObject.kind=Pod,involvedObject.name=bot-1-abc', 'involvedObject.kind=Pod,involvedObject.name=bot-1-def']);
  t.deepEqual(listed, events.slice(0, 2), "another bot's pod's miss is not listed");
  t.is(pullRefusalOf(listed, ownSecret), 'lacked', "a miss of the deploy's other pod counts");
});

test("a back-off's words are the kubelet's last refused pull's, whatever the order of the list", (t) => {
  const notFound = event('Failed', 'Failed to pull image "r/bot:1": not found', 30);
  const backOff = event('Failed', 'Error: ImagePullBackOff', 40);
  t.is(pullWordsOf([notFound, refused(10), backOff, lacked('bot-1-pull', 50)]), notFound.message);
  t.is(pullWordsOf([backOff]), undefined, 'none posted yet');
});
