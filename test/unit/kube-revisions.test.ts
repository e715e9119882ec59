import test from 'ava';
import { ApiException } from '@kubernetes/client-node';
import type { AppsV1Api, CoreV1Api, KubeConfig, V1Deployment } from '@kubernetes/client-node';
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
