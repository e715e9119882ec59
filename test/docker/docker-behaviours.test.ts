import test from 'ava';
import { botBehaviours } from '../behaviours/bot-behaviours.js';
import type { RuntimeHarness } from '../behaviours/runtime-harness.js';
import { dockerHarness } from './docker-harness.js';

let harness: RuntimeHarness;

test.before(async () => {
  harness = await dockerHarness();
});

test.after.always(async () => {
  await harness?.close();
});

botBehaviours(test, () => harness);
