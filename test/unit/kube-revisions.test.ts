import test from 'ava';
import { ApiException } from '@kubernetes/client-node';
import type { AppsV1Api, CoreV1Api, KubeConfig, V1Deployment, V1PodTemplateSpec } from '@kubernetes/client-node';
import { OperationInProgress } from '../../src/errors.js';
import { KubeRevisions } from '../../src/runtime/kubernetes/kube-revisions.js';

// A deploy's writes to its Deployment (docs/api.md §15) go against the resourceVersion read. The controller's
// status updates move it too: such a conflict is tried again, while the deploy's hold is still the one read;
// a hold that changed meanwhile is another deploy's, and a 409.
const HOLD = JSON.stringify({ from: 1, to: 2, deadlineAtMs: 0, template: { metadata: {}, spec: { containers: [{ name: 'bot', image: 'bot:1' }] } } });

function deploymentWith(hold: string | undefined, version: string): V1Deployment {
  return {
    metadata: { name: 'bot-1', resourceVersion: version, labels: { 'bot-agent/bot-id': 'bot_1_1_a' }, annotations: hold === undefined ? {} : { 'bot-agent/deploy': hold } },
    spec: { selector: {}, template: { metadata: {}, spec: { containers: [{ name: 'bot', image: 'bot:2' }] } } },
  };
}

function revisionsOver(reads: V1Deployment[], conflicts: number): { revisions: KubeRevisions; written: V1Deployment[] } {
  const written: V1Deployment[] = [];
  let read = 0;
  let refused = 0;
  const apps = {
    listNamespacedDeployment: async () => ({ items: [reads[Math.min(read++, reads.length - 1)]] }),
    replaceNamespacedDeployment: async ({ body }: { body: V1Deployment }) => {
      if (refused++ < conflicts) throw new ApiException(409, 'Conflict', {}, {});
      written.push(body);
      return body;
    },
  } as unknown as AppsV1Api;
  const revisions = new KubeRevisions(apps, {} as CoreV1Api, {} as KubeConfig, 'bots', async (template) => template);
  return { revisions, written };
}

test("a keep that meets the controller's newer resourceVersion is written again on a fresh read", async (t) => {
  const { revisions, written } = revisionsOver([deploymentWith(HOLD, '1'), deploymentWith(HOLD, '2')], 1);
  await revisions.keep('bot_1_1_a');
  t.is(written.length, 1);
  t.is(written[0]!.metadata!.resourceVersion, '2');
  t.is(written[0]!.metadata!.annotations!['bot-agent/deploy'], undefined, 'the hold is gone');
  t.is(written[0]!.metadata!.annotations!['bot-agent/previous-revision'], '1');
});

test("a write whose hold changed meanwhile is another deploy's: 409, nothing written", async (t) => {
  const other = JSON.stringify({ from: 1, to: 3, deadlineAtMs: 0, template: {} });
  const { revisions, written } = revisionsOver([deploymentWith(HOLD, '1'), deploymentWith(other, '2')], 1);
  await t.throwsAsync(revisions.keep('bot_1_1_a'), { instanceOf: OperationInProgress });
  t.is(written.length, 0);
});

// A deploy's own login is a Secret of its revision, made before the Deployment is written: a write refused
// (another deploy's hold) leaves no Secret behind that no revision names.
test("a deploy whose write is refused removes the login Secret it made for its revision", async (t) => {
  const other = JSON.stringify({ from: 1, to: 3, deadlineAtMs: 0, template: {} });
  const reads = [deploymentWith(undefined, '1'), deploymentWith(other, '2')];
  let read = 0;
  const apps = {
    listNamespacedDeployment: async () => ({ items: [reads[Math.min(read++, reads.length - 1)]] }),
    replaceNamespacedDeployment: async () => {
      throw new ApiException(409, 'Conflict', {}, {});
    },
  } as unknown as AppsV1Api;
  const deleted: string[] = [];
  const core = { deleteNamespacedSecret: async ({ name }: { name: string }) => void deleted.push(name) } as unknown as CoreV1Api;
  const withLogin = async (template: V1PodTemplateSpec) => ({ ...template, spec: { ...template.spec!, imagePullSecrets: [{ name: 'bot-1-pull-r2' }] } });
  const revisions = new KubeRevisions(apps, core, {} as KubeConfig, 'bots', withLogin);
  await t.throwsAsync(revisions.switchTo('bot_1_1_a', 2, { image: 'bot:3' }, Date.now() + 60_000), { instanceOf: OperationInProgress });
  t.deepEqual(deleted, ['bot-1-pull-r2']);
});

// A failed deploy's event carries its run's last lines (docs/api.md §15). The kubelet restarts a run that exited
// at once: the new run may have printed nothing yet, and the lines of why are the run before's.
function revisionsWithPod(state: Record<string, unknown>, logs: { current: string | Error; previous: string }): KubeRevisions {
  const apps = { listNamespacedDeployment: async () => ({ items: [deploymentWith(HOLD, '1')] }) } as unknown as AppsV1Api;
  const pod = {
    metadata: { name: 'bot-1-abc', annotations: { 'bot-agent/revision': '2' } },
    status: { containerStatuses: [{ name: 'bot', restartCount: 1, state, lastState: { terminated: { exitCode: 3 } } }] },
  };
  const core = {
    listNamespacedPod: async () => ({ items: [pod] }),
    readNamespacedPodLog: async ({ previous }: { previous?: boolean }) => {
      if (previous) return logs.previous;
      if (logs.current instanceof Error) throw logs.current;
      return logs.current;
    },
  } as unknown as CoreV1Api;
  return new KubeRevisions(apps, core, {} as KubeConfig, 'bots', async (template) => template);
}

test("a failed run restarted already: its lines are the run before's, and the new run's after them", async (t) => {
  t.is(await revisionsWithPod({ running: {} }, { current: '', previous: 'boom before the crash\n' }).lastLines('bot_1_1_a', 20), 'boom before the crash\n');
  t.is(await revisionsWithPod({ running: {} }, { current: 'starting\n', previous: 'boom\n' }).lastLines('bot_1_1_a', 20), 'boom\nstarting\n');
  t.is(await revisionsWithPod({ running: {} }, { current: 'two\n', previous: 'zero\none\n' }).lastLines('bot_1_1_a', 2), 'one\ntwo\n');
  t.is(await revisionsWithPod({ running: {} }, { current: 'up\n', previous: 'no newline' }).lastLines('bot_1_1_a', 20), 'no newline\nup\n');
});

test('a restarted run whose new container cannot be read yet: the run before is still read', async (t) => {
  const notYet = new ApiException(400, 'container "bot" in pod "bot-1-abc" is waiting to start: ContainerCreating', {}, {});
  t.is(await revisionsWithPod({ running: {} }, { current: notYet, previous: 'boom\n' }).lastLines('bot_1_1_a', 20), 'boom\n');
});

test('a run waiting to be restarted: the kubelet answers the run that exited as its own, not twice', async (t) => {
  t.is(await revisionsWithPod({ waiting: { reason: 'CrashLoopBackOff' } }, { current: 'boom\n', previous: 'boom\n' }).lastLines('bot_1_1_a', 20), 'boom\n');
});
