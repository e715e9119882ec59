import test from 'ava';
import { botBehaviours } from '../behaviours/bot-behaviours.js';
import type { RuntimeHarness } from '../behaviours/runtime-harness.js';
import { clusterHarness } from './cluster-harness.js';

// The behaviours every runtime must show, on the real cluster of `npm run kube:up`.
let harness: RuntimeHarness;

test.before(async () => {
  ({ harness } = await clusterHarness());
});

test.after.always(async () => {
  await harness?.close();
});

botBehaviours(test, () => harness);
