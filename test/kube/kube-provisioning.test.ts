import test from 'ava';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { startAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { chartGrants } from '../helpers/helm.js';
import { call } from '../helpers/http-client.js';
import { FakeKubeApi } from '../helpers/kube/fake-kube-api.js';
import { NAMESPACE } from './kube-harness.js';

// The platform lists bots, is refused a second create and removes bots through the test API
// server, with exactly the rights the chart's Role grants. A created bot really running, with
// its whole environment, is in test/kube-cluster/provisioning.test.ts.
const TOKEN = 'kube-token-never-shown';

async function setUp(t: { teardown(fn: () => Promise<void>): void }, pullSecrets: string[] = []) {
  const api = new FakeKubeApi(NAMESPACE, await chartGrants(NAMESPACE));
  await api.start();
  const kubeConfig = api.kubeConfig();
  const agent = await startAgent(
    createKubernetesDriver({ kubeConfig, namespace: NAMESPACE }),
    {},
    '127.0.0.1',
    createKubernetesProvisioner({ kubeConfig, namespace: NAMESPACE, agentUrl: 'http://agent:8000', pullSecrets, awaitImage: false }),
  );
  t.teardown(async () => {
    await agent.close();
    await api.stop();
  });
  return { api, server: agent.server };
}

const createBody = (id: string, extra: Record<string, unknown> = {}) => ({
  bot_id: id,
  user_id: 'user_3',
  image: 'registry.example.com/bot:1',
  template: 'discord',
  token: TOKEN,
  ...extra,
});

test('listing, a second create, and removal', async (t) => {
  const { api, server } = await setUp(t);
  const id = 'bot_8_8_list';
  t.is((await call(server, '/api/admin/bots', { body: createBody(id, { domain: 'bot.example.com' }) })).status, 201);
  t.is((await call(server, '/api/admin/bots', { body: createBody(id) })).status, 409);
  t.true(await eventually(() => api.livePods(id).length === 1));
  t.true(
    await eventually(async () => {
      const listed = await call(server, '/api/admin/bots?user_id=user_3');
      return (listed.body?.bots as Array<{ bot_id: string; state: string }>).some((b) => b.bot_id === id && b.state === 'running');
    }),
  );
  const all = await call(server, '/api/admin/bots');
  t.notRegex(all.text, new RegExp(TOKEN));
  t.deepEqual((await call(server, '/api/admin/bots?user_id=someone_else')).body?.bots, []);
  t.is((await call(server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  t.is(api.deploymentOf(id), undefined);
  t.is(api.secrets.size, 0);
  t.is((await call(server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 404);
});

test('the chart\'s Role allows exactly what provisioning calls', async (t) => {
  const { api, server } = await setUp(t);
  const created = await call(server, '/api/admin/bots', { body: createBody('bot_9_9_rbac') });
  t.is(created.status, 201, created.text);
  t.is((await call(server, '/api/admin/bots')).status, 200);
  t.is((await call(server, '/api/admin/bots/bot_9_9_rbac', { method: 'DELETE' })).status, 200);
  t.deepEqual(api.requests.filter((request) => request.endsWith(' 403')), []);
  t.true(api.requests.some((request) => request.startsWith('create secrets')));
  t.true(api.requests.some((request) => request.startsWith('delete apps/deployments')));
});

test('a bot cannot create, list or remove bots', async (t) => {
  const { api, server } = await setUp(t);
  api.addBot({ id: 'bot_1_1_caller', podIP: '127.0.66.1' });
  for (const [method, path, body] of [
    ['POST', '/api/admin/bots', createBody('bot_2_2_new')],
    ['GET', '/api/admin/bots', undefined],
    ['DELETE', '/api/admin/bots/bot_1_1_caller', undefined],
  ] as const) {
    const reply = await call(server, path, { method, body, from: '127.0.66.1' });
    t.is(reply.status, 403, `${method} ${path}`);
  }
  t.is(api.deploymentOf('bot_2_2_new'), undefined);
  t.truthy(api.deploymentOf('bot_1_1_caller'));
});

test("a create's registry login becomes a dockerconfigjson Secret its pod pulls with, beside the configured ones; it goes with the bot", async (t) => {
  const { api, server } = await setUp(t, ['team-registry']);
  const id = 'bot_8_8_pull';
  const login = { username: 'robot', password: 'pull-password-never-shown' };
  const created = await call(server, '/api/admin/bots', { body: createBody(id, { registry_auth: login }) });
  t.is(created.status, 201, created.text);
  const deployment = api.deploymentOf(id) as { metadata: { name: string }; spec: { template: { spec: { imagePullSecrets?: { name: string }[] } } } };
  const name = deployment.metadata.name;
  t.deepEqual(deployment.spec.template.spec.imagePullSecrets, [{ name: 'team-registry' }, { name: `${name}-pull` }]);
  const secret = api.secrets.get(`${name}-pull`) as { type: string; stringData?: Record<string, string>; data?: Record<string, string> };
  t.is(secret.type, 'kubernetes.io/dockerconfigjson');
  const config = JSON.parse(secret.stringData?.['.dockerconfigjson'] ?? Buffer.from(secret.data?.['.dockerconfigjson'] ?? '', 'base64').toString()) as {
    auths: Record<string, { username: string; password: string; auth: string }>;
  };
  t.deepEqual(config.auths['registry.example.com'], { ...login, auth: Buffer.from('robot:pull-password-never-shown').toString('base64') });
  t.notRegex((await call(server, '/api/admin/bots')).text, /pull-password-never-shown/);
  t.is((await call(server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  t.is(api.secrets.size, 0);
  // Without a login of its own, a bot pulls with the configured Secrets alone.
  t.is((await call(server, '/api/admin/bots', { body: createBody('bot_8_8_plain') })).status, 201);
  const plain = api.deploymentOf('bot_8_8_plain') as { spec: { template: { spec: { imagePullSecrets?: { name: string }[] } } } };
  t.deepEqual(plain.spec.template.spec.imagePullSecrets, [{ name: 'team-registry' }]);
});
