import test from 'ava';
import type { V1Deployment } from '@kubernetes/client-node';
import { DATA_HELPER_LABEL, helperPod } from '../../src/runtime/kubernetes/kube-data-pods.js';
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
