import test from 'ava';
import { ApiException } from '@kubernetes/client-node';
import type { CoreV1Api, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { awaitPod, DATA_HELPER_LABEL, helperPod } from '../../src/runtime/kubernetes/kube-data-pods.js';
import type { KubeDataApi } from '../../src/runtime/kubernetes/kube-data-pods.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';

// A helper pod of a bot's data (docs/api.md §20): the bot's image as its node has it, the bot's own pull Secrets,
// the bot's user and no token of the cluster; labelled as a helper, never as the bot.
const deployment: V1Deployment = {
  spec: {
    selector: {},
    template: { spec: { imagePullSecrets: [{ name: 'bot-1-pull' }], containers: [{ name: 'bot', image: 'registry.example.com/bot:latest' }] } },
  },
};

test("a helper pod runs the bot's image from its node, as the bot's user, with no token and no restart", (t) => {
  const pod = helperPod(deployment, 'bot_1_1_a', { name: 'bot-1-backup-x', labels: {}, mounts: [{ name: 'claim', mountPath: '/data', readOnly: true }], script: 'tar c .', args: [], node: 'node-a', graceS: 5 });
  const container = pod.spec?.containers[0];
  t.is(container?.image, 'registry.example.com/bot:latest');
  t.is(container?.imagePullPolicy, 'IfNotPresent', 'a `:latest` the node holds is not pulled again (a registry away would fail the backup)');
  t.deepEqual(pod.spec?.imagePullSecrets, [{ name: 'bot-1-pull' }]);
  t.is(pod.spec?.nodeName, 'node-a');
  t.is(pod.spec?.automountServiceAccountToken, false);
  t.is(pod.spec?.restartPolicy, 'Never');
  t.like(pod.spec?.securityContext, { runAsNonRoot: true });
  t.like(container?.securityContext, { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } });
  t.is(pod.metadata?.labels?.[DATA_HELPER_LABEL], 'bot_1_1_a');
  t.is(pod.metadata?.labels?.[BOT_LABEL], undefined, "never the bot's own label");
});

// The API server's answers to a helper pod's reads, one a read (the last repeated): an API server that fails now and
// then is not one a real cluster can be made to be on demand.
function answering(...answers: Array<V1Pod | number>): { api: KubeDataApi; reads: () => number } {
  let reads = 0;
  const core = {
    readNamespacedPod: async () => {
      const answer = answers[Math.min(reads++, answers.length - 1)]!;
      if (typeof answer === 'number') throw new ApiException(answer, `HTTP ${answer}`, {}, {});
      return answer;
    },
  } as unknown as CoreV1Api;
  return { api: { core, apps: undefined as never, namespace: 'bots' }, reads: () => reads };
}
const gone = (pod: V1Pod | undefined): true | undefined => (pod === undefined ? true : undefined);
const late = () => new Error('late');

test('a wait for a helper pod rides out reads the API server failed (5xx, 429): they say nothing of the pod', async (t) => {
  const { api, reads } = answering(503, 429, { metadata: { name: 'p' } }, 500, 404);
  t.true(await awaitPod(api, 'p', gone, 10_000, late));
  t.is(reads(), 5, 'read until the 404 said the pod was gone');
});

test("a wait for a helper pod ends at once on a refusal that reading again cannot change (403), with the API server's error", async (t) => {
  const { api, reads } = answering(503, 403);
  const err = await t.throwsAsync(awaitPod(api, 'p', gone, 10_000, late));
  t.is((err as ApiException<unknown>).code, 403);
  t.is(reads(), 2);
});

test('a wait whose reads all failed ends at its deadline with the last failure, not a claim that the pod was late', async (t) => {
  const { api } = answering(503);
  const err = await t.throwsAsync(awaitPod(api, 'p', gone, 500, late));
  t.is((err as ApiException<unknown>).code, 503);
  const still = answering({ metadata: { name: 'p' } });
  await t.throwsAsync(awaitPod(still.api, 'p', gone, 500, late), { message: 'late' });
});
