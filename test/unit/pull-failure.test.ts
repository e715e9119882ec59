import test from 'ava';
import { ImageNotFound, RegistryRefused, RegistryUnreachable } from '../../src/errors.js';
import { pullFailure } from '../../src/runtime/pull-failure.js';
import { isInternalRegistry } from '../../src/provisioning/registry-policy.js';

// The words the engine and the kubelet (containerd) really give for a failed pull (docs/api.md §14), each
// to its status; an image name with digits that look like a status is no status.
const IMAGE = '127.0.0.1:25500/tests/bot-401:v403';

test('the kubelet\'s words: not found is 422, a 401 is 403, a refused connection is 502', (t) => {
  const kubelet = (tail: string) => `failed to pull and unpack image "${IMAGE}": failed to resolve reference "${IMAGE}": ${tail}`;
  t.true(pullFailure(IMAGE, kubelet(`${IMAGE}: not found`), undefined) instanceof ImageNotFound);
  t.true(pullFailure(IMAGE, kubelet('pulling from host 127.0.0.1:25500 failed with status code [manifests v403]: 401 Unauthorized'), undefined) instanceof RegistryRefused);
  t.true(pullFailure(IMAGE, kubelet('failed to do request: Head "https://127.0.0.1:1/v2/tests/nothing/manifests/v1": dial tcp 127.0.0.1:1: connect: connection refused'), undefined) instanceof RegistryUnreachable);
});

test("the engine's words: manifest unknown is 422, unauthorized is 403, Docker Hub's 'does not exist or may require docker login' is 422", (t) => {
  t.true(pullFailure(IMAGE, 'manifest unknown', 404) instanceof ImageNotFound);
  t.true(pullFailure(IMAGE, `Head "http://127.0.0.1:25500/v2/tests/bot-401/manifests/v403": unauthorized: authentication required`, undefined) instanceof RegistryRefused);
  t.true(pullFailure('bot:1', "pull access denied for bot, repository does not exist or may require 'docker login': denied: requested access to the resource is denied", undefined) instanceof ImageNotFound);
  t.true(pullFailure(IMAGE, 'received unexpected HTTP status: 500 Internal Server Error', undefined) instanceof RegistryUnreachable);
});

test("a registry's page is never repeated: only its status and the known words of why", (t) => {
  const page = '<html><title>Jenkins admin</title><body>internal-secret-42 ' + 'x'.repeat(1_000_000) + '</body></html>';
  const engine = `error parsing HTTP 418 response body: invalid character '<' looking for beginning of value: "${page}"`;
  const unreachable = pullFailure(IMAGE, engine, undefined);
  t.true(unreachable instanceof RegistryUnreachable);
  t.is(unreachable.message, `the registry of image ${IMAGE} could not be reached or failed the pull: HTTP 418`);
  t.is(pullFailure(IMAGE, page, undefined).message, `the registry of image ${IMAGE} could not be reached or failed the pull: no words the agent repeats`);
  const missing = pullFailure(IMAGE, `manifest unknown: ${page}`, 404);
  t.true(missing instanceof ImageNotFound);
  t.is(missing.message, `image ${IMAGE} was not found in its registry: HTTP 404, manifest unknown`);
  const kubelet = pullFailure(IMAGE, `failed to resolve reference: pulling from host failed with status code [manifests v1]: 401 Unauthorized ${page}`, undefined);
  t.is(kubelet.message, `the registry of image ${IMAGE} refused the pull's credentials (registry_auth or AGENT_REGISTRY_AUTH): HTTP 401, unauthorized`);
});

test('internal registries: loopback, private, link-local and localhost, IPv4 written as IPv6 too; public ones and names are not', (t) => {
  for (const registry of ['localhost:5000', 'registry.localhost', '127.0.0.1:25500', '10.0.0.5', '172.31.0.1:5000', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0:80', '[::1]:5000', '[fe80::1]', '[fd00::1]:5000', '[::ffff:127.0.0.1]:5000']) {
    t.true(isInternalRegistry(registry), registry);
  }
  for (const registry of ['docker.io', 'ghcr.io', '8.8.8.8:5000', '172.32.0.1', '[2001:db8::1]:5000', 'registry.internal.example.com']) t.false(isInternalRegistry(registry), registry);
});
