import test from 'ava';
import { standInApi } from '../helpers/kube/stand-in.js';
import type { ExecutionContext } from 'ava';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { CryptoKey, JWK } from 'jose';
import { ClusterTokenKeys } from '../../src/runtime/kubernetes/kube-token-keys.js';

// The signature check of ServiceAccount tokens (docs/api.md §4, rule 8) against keys the test makes, published by a
// stand-in of the API server's `/openid/v1/jwks` (the real cluster's own keys: test/kube-cluster/token-identity.test.ts).

interface Signer {
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}

async function signer(alg: 'RS256' | 'ES256', kid: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

const tokenOf = (by: Signer, alg: 'RS256' | 'ES256', kid: string | undefined = by.jwk.kid) =>
  new SignJWT({ sub: 'system:serviceaccount:bots:default', aud: ['bot-agent'] }).setProtectedHeader(kid === undefined ? { alg } : { alg, kid }).setExpirationTime('1h').sign(by.privateKey);

/** A stand-in API server whose published keys the test sets (`undefined`: refused, 403); counts its reads. */
async function standIn(t: ExecutionContext, published: { keys: JWK[] | undefined }) {
  let reads = 0;
  const config = await standInApi(t, (req, res) => {
    if (!req.url?.startsWith('/openid/v1/jwks')) {
      res.writeHead(404).end();
      return;
    }
    reads += 1;
    if (published.keys === undefined) {
      res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403 }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(JSON.stringify({ keys: published.keys }));
  });
  return { config, reads: () => reads };
}

test("a token the cluster's key signed is valid, RSA or EC; changed, unsigned, of another key or another algorithm, it is not", async (t) => {
  const rsa = await signer('RS256', 'k-rsa');
  const ec = await signer('ES256', 'k-ec');
  const foreign = await signer('RS256', 'k-rsa');
  const api = await standIn(t, { keys: [rsa.jwk, ec.jwk] });
  const keys = new ClusterTokenKeys(api.config);
  const signed = await tokenOf(rsa, 'RS256');
  t.is(await keys.verdict(signed), 'valid');
  t.is(await keys.verdict(await tokenOf(ec, 'ES256')), 'valid');
  const [header, , signature] = signed.split('.');
  const claims = Buffer.from(JSON.stringify({ sub: 'system:serviceaccount:bots:victim', aud: ['bot-agent'] })).toString('base64url');
  t.is(await keys.verdict(`${header}.${claims}.${signature}`), 'invalid', 'its claims changed');
  const none = Buffer.from(JSON.stringify({ alg: 'none', kid: 'k-rsa' })).toString('base64url');
  t.is(await keys.verdict(`${none}.${claims}.`), 'invalid', 'alg none');
  t.is(await keys.verdict(await tokenOf(foreign, 'RS256')), 'invalid', "another key under the cluster key's id");
  const hs = Buffer.from(JSON.stringify({ alg: 'HS256', kid: 'k-rsa' })).toString('base64url');
  t.is(await keys.verdict(`${hs}.${claims}.${signature}`), 'invalid', 'HMAC named for an RSA key');
  for (const junk of ['', 'a.b', 'a.b.c', '...', `${header}.${claims}`]) t.is(await keys.verdict(junk), 'invalid', junk);
  t.is(api.reads(), 1, 'read once: forged tokens cost the API server nothing');
});

test("a token without a key id is checked against each of the cluster's keys: valid when one of them signed it", async (t) => {
  const one = await signer('RS256', 'k-1');
  const api = await standIn(t, { keys: [(await signer('RS256', 'k-2')).jwk, one.jwk] });
  const keys = new ClusterTokenKeys(api.config);
  t.is(await keys.verdict(await tokenOf(one, 'RS256', undefined)), 'valid');
  t.is(await keys.verdict(await tokenOf(await signer('RS256', 'k-1'), 'RS256', undefined)), 'invalid', 'a key not the cluster\'s');
});

test('a key rotated in is read again, at most every 10 s; keys that cannot be read make the verdict unknown', async (t) => {
  const old = await signer('RS256', 'k-old');
  const rotated = await signer('ES256', 'k-new');
  const published: { keys: JWK[] | undefined } = { keys: [old.jwk] };
  const api = await standIn(t, published);
  let now = 1_000_000;
  const keys = new ClusterTokenKeys(api.config, () => undefined, () => now);
  t.is(await keys.verdict(await tokenOf(old, 'RS256')), 'valid');
  published.keys = [old.jwk, rotated.jwk];
  const fresh = await tokenOf(rotated, 'ES256');
  t.is(await keys.verdict(fresh), 'invalid', 'within 10 s of the last read: not read again');
  t.is(api.reads(), 1);
  now += 10_000;
  t.is(await keys.verdict(fresh), 'valid', 'read again for a key it lacks');
  t.is(api.reads(), 2);
  const refused = await standIn(t, { keys: undefined });
  t.is(await new ClusterTokenKeys(refused.config).verdict(fresh), 'unknown');
});
