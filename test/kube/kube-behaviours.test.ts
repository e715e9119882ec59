import test from 'ava';
import { botBehaviours } from '../behaviours/bot-behaviours.js';
import type { RuntimeHarness } from '../behaviours/runtime-harness.js';
import type { FakeKubeApi } from '../helpers/kube/fake-kube-api.js';
import { kubeHarness } from './kube-harness.js';

let harness: RuntimeHarness;
let api: FakeKubeApi;

test.before(async () => {
  ({ harness, api } = await kubeHarness());
});

test.after.always(async () => {
  await harness?.close();
});

botBehaviours(test, () => harness);

// After every behaviour: the driver made no call the chart's Role does not grant.
test.after('no request was refused by RBAC', (t) => {
  t.deepEqual(
    api.requests.filter((request) => request.endsWith(' 403')),
    [],
  );
});
