import test from 'ava';
import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { readPodLogs } from '../../src/runtime/kubernetes/kube-logs.js';

// What the kubelet answers, with 200, for a container whose logs are gone (a pod being deleted): no lines, never
// its words taken for the bot's (an exit record once kept them as the run's last lines).
const answering = (text: string) => ({ readNamespacedPodLog: async () => text }) as unknown as CoreV1Api;
const target = { namespace: 'bots', pod: 'bot-1', container: 'bot', previous: false };

test("the kubelet's answers for logs that are gone are no lines", async (t) => {
  const path = '/var/lib/kubelet/pods/bots_bot-1_94528d43/bot/0.log';
  for (const text of [
    'unable to retrieve container logs for containerd://0123abcd',
    `failed to try resolving symlinks in path "${path}": lstat ${path}: no such file or directory`,
  ]) {
    t.is(await readPodLogs(answering(text), {} as KubeConfig, target, 100), '', text);
  }
  t.is(await readPodLogs(answering('hello from the pod\n'), {} as KubeConfig, target, 100), 'hello from the pod\n');
});
