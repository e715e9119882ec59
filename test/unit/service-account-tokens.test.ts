import type { IncomingMessage, ServerResponse } from 'node:http';
import test from 'ava';
import { standInApi } from '../helpers/kube/stand-in.js';
import type { ExecutionContext } from 'ava';
import { RuntimeUnavailable, TooManyRequests } from '../../src/errors.js';
import { BadBotToken } from '../../src/identity/bot-tokens.js';
import { ServiceAccountTokens } from '../../src/runtime/kubernetes/kube-token-review.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';

// What the real cluster cannot show (test/kube-cluster/token-identity.test.ts shows the rest): how many
// TokenReviews the agent asks for as time passes and callers crowd in. A stand-in API server counts them.

const NAMESPACE = 'bots';
const BOT = 'bot_1_2_abc';

/** A JWT-shaped token; its signature is the stand-in's business (`good` in it: authenticated). */
function token(name: string, expiresInS: number, now: number): string {
  const claims = { aud: ['bot-agent'], exp: Math.floor(now / 1000) + expiresInS };
  return `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${name}`;
}

async function standIn(t: ExecutionContext, options: { holdReviews?: boolean } = {}) {
  let reviews = 0;
  const held: (() => void)[] = [];
  const config = await standInApi(t, (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const answer = (value: unknown) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      // This stand-in publishes no keys (as for a user who may not read them): the reviews alone judge.
      if (req.url?.startsWith('/openid/v1/jwks')) {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403 }));
        return;
      }
      if (req.url?.startsWith('/apis/authentication.k8s.io/v1/tokenreviews')) {
        reviews += 1;
        const presented = String((JSON.parse(body) as { spec: { token: string } }).spec.token);
        const verdict = presented.endsWith('good')
          ? {
              authenticated: true,
              audiences: ['bot-agent'],
              user: { username: `system:serviceaccount:${NAMESPACE}:default`, extra: { 'authentication.kubernetes.io/pod-name': ['bot-pod'], 'authentication.kubernetes.io/pod-uid': ['uid-1'] } },
            }
          : { authenticated: false, error: 'invalid bearer token' };
        const send = () => answer({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status: verdict });
        if (options.holdReviews) held.push(send);
        else send();
        return;
      }
      answer({ apiVersion: 'v1', kind: 'PodList', metadata: {}, items: [{ metadata: { name: 'bot-pod', uid: 'uid-1', labels: { [BOT_LABEL]: BOT } } }] });
    });
  });
  return { config, reviews: () => reviews, release: () => held.splice(0).forEach((send) => send()), held: () => held.length };
}

test('a verdict is kept until 30 s before the token expires, and at most 5 minutes; a refusal 30 s', async (t) => {
  const api = await standIn(t);
  let now = Date.now();
  const tokens = new ServiceAccountTokens(api.config, NAMESPACE, () => now);
  const hourLong = token('good', 3600, now);
  t.is(await tokens.botNamed(hourLong), BOT);
  t.is(await tokens.botNamed(hourLong), BOT);
  t.is(api.reviews(), 1, 'the same token twice asked the cluster twice');
  now += 4 * 60_000;
  await tokens.botNamed(hourLong);
  t.is(api.reviews(), 1);
  now += 61_000;
  await tokens.botNamed(hourLong);
  t.is(api.reviews(), 2, 'a verdict outlived 5 minutes');

  const shortLived = token('good', 45, now);
  await tokens.botNamed(shortLived);
  now += 14_000;
  await tokens.botNamed(shortLived);
  t.is(api.reviews(), 3);
  now += 2_000;
  await tokens.botNamed(shortLived);
  t.is(api.reviews(), 4, 'a verdict outlived its token by less than 30 s');

  const forged = token('forged', 3600, now);
  for (let i = 0; i < 3; i += 1) await t.throwsAsync(tokens.botNamed(forged), { instanceOf: BadBotToken, message: /does not accept the token \(invalid bearer token\)/ });
  t.is(api.reviews(), 5, 'a refusal was asked for again at once');
  now += 31_000;
  await t.throwsAsync(tokens.botNamed(forged), { instanceOf: BadBotToken });
  t.is(api.reviews(), 6);
});

test('expired, foreign-audience and malformed tokens are refused without asking the cluster', async (t) => {
  const api = await standIn(t);
  const now = Date.now();
  const tokens = new ServiceAccountTokens(api.config, NAMESPACE, () => now);
  await t.throwsAsync(tokens.botNamed(token('good', -1, now)), { instanceOf: BadBotToken, message: 'forbidden: the token has expired' });
  const vault = `e30.${Buffer.from(JSON.stringify({ aud: 'vault', exp: now / 1000 + 600 })).toString('base64url')}.good`;
  await t.throwsAsync(tokens.botNamed(vault), { instanceOf: BadBotToken, message: /not for the audience bot-agent/ });
  for (const malformed of ['', 'a.b', 'a..c', 'e30.bm90IGpzb24.good', `e30.${Buffer.from('[1]').toString('base64url')}.good`]) {
    await t.throwsAsync(tokens.botNamed(malformed), { instanceOf: BadBotToken, message: /not a ServiceAccount token/ }, malformed);
  }
  t.is(api.reviews(), 0);
});

test('one review per token however many ask at once; 8 in flight, 64 waiting, further new tokens 429', async (t) => {
  const api = await standIn(t, { holdReviews: true });
  const now = Date.now();
  const tokens = new ServiceAccountTokens(api.config, NAMESPACE, () => now);
  const same = token('good', 3600, now);
  // Outcomes, not bare promises: a review held past its 1.5 s deadline on a loaded machine is a failed assertion, not an unhandled rejection.
  const sameAsked = Array.from({ length: 20 }, () => tokens.botNamed(same).catch((err: unknown) => err));
  const distinct = Array.from({ length: 100 }, (_, i) => tokens.botNamed(token(`${i}good`, 3600, now)).then(() => 'named', (err: unknown) => err));
  // Held only until the eighth review arrives: the reviews' own 1.5 s deadline is not what this test is about.
  for (const deadline = Date.now() + 5_000; api.held() < 8 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 5));
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.is(api.held(), 8, 'reviews in flight');
  const settled = await Promise.race([Promise.all(distinct.slice(71)), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
  t.true(Array.isArray(settled) && settled.every((err) => err instanceof TooManyRequests), 'a new token past the 8 in flight and 64 waiting was not refused');
  let settledAll = false;
  void Promise.all([...sameAsked, ...distinct]).finally(() => (settledAll = true));
  while (!settledAll) {
    api.release();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.deepEqual(await Promise.all(sameAsked), Array(20).fill(BOT));
  t.deepEqual((await Promise.all(distinct.slice(0, 71))).filter((outcome) => outcome !== 'named'), []);
  t.is(api.reviews(), 72, 'one review per distinct token, the refused ones never asked');
});

test('an address whose tokens the cluster refused 10 times in 30 s has its further new tokens refused (429) unasked; others are not', async (t) => {
  const api = await standIn(t);
  let now = Date.now();
  const tokens = new ServiceAccountTokens(api.config, NAMESPACE, () => now);
  for (let i = 0; i < 10; i += 1) {
    await t.throwsAsync(tokens.botNamed(token(`forged${i}`, 3600, now), '10.0.0.7'), { instanceOf: BadBotToken });
  }
  t.is(api.reviews(), 10);
  await t.throwsAsync(tokens.botNamed(token('forged-more', 3600, now), '10.0.0.7'), { instanceOf: TooManyRequests, message: /too many refused tokens from 10\.0\.0\.7/ });
  t.is(api.reviews(), 10, 'the eleventh was asked for');
  t.is(await tokens.botNamed(token('good', 3600, now), '10.0.0.8'), BOT, 'another address waits for nobody');
  now += 31_000;
  await t.throwsAsync(tokens.botNamed(token('forged-later', 3600, now), '10.0.0.7'), { instanceOf: BadBotToken });
  t.is(api.reviews(), 12, 'the window ended: its next token is asked for');
});

test('an API server that does not answer: the reviews in flight end at their deadline, and those waiting hear the same without asking it', async (t) => {
  const api = await standIn(t, { holdReviews: true });
  const now = Date.now();
  const tokens = new ServiceAccountTokens(api.config, NAMESPACE, () => now);
  const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => tokens.botNamed(token(`${i}good`, 3600, now)).then(() => 'named', (err: unknown) => err)));
  t.true(outcomes.every((outcome) => outcome instanceof RuntimeUnavailable), String(outcomes.find((outcome) => !(outcome instanceof RuntimeUnavailable))));
  t.is(api.reviews(), 8, 'a waiting token asked the silent API server too');
});
