import test from 'ava';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { PersistentVolumeClaim, Service, ServiceAccount } from 'kubernetes-models/v1';
import { CHART, helm, renderChart } from '../helpers/helm.js';
import type { KubeObject } from '../helpers/helm.js';

/** The Kubernetes schemas of every kind the chart may render, from kubernetes-models. */
const models: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'networking.k8s.io/v1/Ingress': Ingress,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

function validateAll(t: { notThrows(fn: () => void, message?: string): void; truthy(value: unknown, message?: string): void }, objects: KubeObject[]) {
  for (const object of objects) {
    const Model = models[`${object.apiVersion}/${object.kind}`];
    t.truthy(Model, `no schema for ${object.apiVersion} ${object.kind}`);
    if (Model) t.notThrows(() => new Model(object as never).validate(), `${object.kind} ${object.metadata.name}`);
  }
}

const byKind = (objects: KubeObject[], kind: string): KubeObject[] => objects.filter((o) => o.kind === kind);

test('helm lint passes', async (t) => {
  const out = await helm('lint', CHART, '--strict');
  t.regex(out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
});

test('every rendered object is valid against the Kubernetes schema of its kind', async (t) => {
  const objects = await renderChart();
  t.deepEqual(objects.map((o) => o.kind).sort(), [
    'ClusterRole',
    'ClusterRoleBinding',
    'Deployment',
    'NetworkPolicy',
    'PersistentVolumeClaim',
    'Role',
    'RoleBinding',
    'Service',
    'ServiceAccount',
  ]);
  validateAll(t, objects);
});

test('variants render valid objects too', async (t) => {
  validateAll(
    t,
    await renderChart('platform', {
      'rbac.readNodes': 'false',
      'networkPolicy.enabled': 'false',
      'serviceAccount.create': 'false',
      'serviceAccount.name': 'existing',
      'adminToken.existingSecret': 'agent-token',
      'image.tag': '1.2.3',
    }),
  );
});

test('the Service is named agent on port 8000, as bots expect', async (t) => {
  const [service] = byKind(await renderChart(), 'Service');
  t.is(service?.metadata.name, 'agent');
  t.like(service, { spec: { ports: [{ port: 8000, targetPort: 'http' }] } });
});

test('the agent runs non-root, read-only, without privilege escalation, with probes on /healthz and /readyz', async (t) => {
  const [deployment] = byKind(await renderChart(), 'Deployment');
  const spec = (deployment as unknown as { spec: { template: { spec: Record<string, any> } } }).spec.template.spec;
  const [container] = spec.containers;
  t.true(spec.securityContext.runAsNonRoot);
  t.like(container.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
  t.is(container.livenessProbe.httpGet.path, '/healthz');
  t.is(container.readinessProbe.httpGet.path, '/readyz');
  t.truthy(container.resources.limits.memory);
  t.deepEqual(
    container.env.find((e: { name: string }) => e.name === 'AGENT_RUNTIME'),
    { name: 'AGENT_RUNTIME', value: 'kubernetes' },
  );
});

test('the admin token comes from a Secret only when one is named', async (t) => {
  const env = async (set: Record<string, string>) =>
    (byKind(await renderChart('bots', set), 'Deployment')[0] as any).spec.template.spec.containers[0].env as Array<{ name: string; valueFrom?: unknown }>;
  t.falsy((await env({})).find((e) => e.name === 'AGENT_ADMIN_TOKEN'));
  t.deepEqual((await env({ 'adminToken.existingSecret': 'tok' })).find((e) => e.name === 'AGENT_ADMIN_TOKEN')?.valueFrom, {
    secretKeyRef: { name: 'tok', key: 'token' },
  });
});

test('identity.mode reaches the agent as AGENT_IDENTITY, and only a token mode lets it create TokenReviews', async (t) => {
  const rendered = async (set: Record<string, string>) => {
    const objects = await renderChart('bots', set);
    const env = (byKind(objects, 'Deployment')[0] as any).spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>;
    const rules = byKind(objects, 'ClusterRole').flatMap((role) => (role as any).rules as Array<{ resources: string[]; verbs: string[] }>);
    return { identity: env.find((e) => e.name === 'AGENT_IDENTITY')?.value, rules };
  };
  const reviews = { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] };
  const byAddress = await rendered({});
  t.is(byAddress.identity, undefined);
  t.false(byAddress.rules.some((rule) => rule.resources.includes('tokenreviews')));
  for (const mode of ['token', 'address+token']) {
    const byToken = await rendered({ 'identity.mode': mode });
    t.is(byToken.identity, mode);
    t.deepEqual(byToken.rules.find((rule) => rule.resources.includes('tokenreviews')), reviews);
  }
  const reviewsOnly = await rendered({ 'identity.mode': 'token', 'rbac.readNodes': 'false' });
  t.deepEqual(reviewsOnly.rules, [reviews], 'without node reads the ClusterRole grants the reviews alone');
  t.deepEqual((await rendered({ 'rbac.readNodes': 'false' })).rules, [], 'no ClusterRole at all by address without node reads');
});

test("botImagePullSecrets reach the agent as AGENT_IMAGE_PULL_SECRETS, and none is set by default", async (t) => {
  const envOf = async (set: Record<string, string>) =>
    ((byKind(await renderChart('bots', set), 'Deployment')[0] as any).spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).find(
      (e) => e.name === 'AGENT_IMAGE_PULL_SECRETS',
    )?.value;
  t.is(await envOf({}), undefined);
  t.is(await envOf({ 'botImagePullSecrets[0]': 'team-registry', 'botImagePullSecrets[1]': 'hub' }), 'team-registry,hub');
});

test('the NetworkPolicy admits only pods labelled as bots, plus the configured peers', async (t) => {
  const [policy] = byKind(await renderChart('bots', { 'networkPolicy.extraFrom[0].namespaceSelector.matchLabels.team': 'platform' }), 'NetworkPolicy');
  const from = (policy as any).spec.ingress[0].from;
  t.deepEqual(from[0], { podSelector: { matchExpressions: [{ key: 'bot-agent/bot-id', operator: 'Exists' }] } });
  t.deepEqual(from[1], { namespaceSelector: { matchLabels: { team: 'platform' } } });
});

test('values.schema.json refuses bad values', async (t) => {
  for (const [set, refusal] of [
    ['restartTimeoutMs=soon', /- restartTimeoutMs: Invalid type\. Expected: integer/],
    ['service.port=0', /- service\.port: Must be greater than or equal to 1/],
    ['image.pullPolicy=Sometimes', /- image\.pullPolicy: image\.pullPolicy must be one of/],
    ['unknownKey=1', /Additional property unknownKey is not allowed/],
    ['replicaCount=2', /- replicaCount: Must be less than or equal to 1/],
    ['identity.mode=bearer', /- identity\.mode: identity\.mode must be one of/],
  ] as const) {
    const error = await t.throwsAsync(helm('template', 'rel', CHART, '--set', set));
    t.regex(String((error as { stderr?: string }).stderr), refusal, set);
  }
});

test('the agent pods are annotated for Prometheus unless told not to, and never get a service mesh sidecar', async (t) => {
  const annotations = async (set: Record<string, string>) =>
    (byKind(await renderChart('bots', set), 'Deployment')[0] as any).spec.template.metadata.annotations;
  t.like(await annotations({}), { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '8000', 'prometheus.io/path': '/metrics' });
  t.deepEqual(await annotations({ 'metrics.scrapeAnnotations': 'false' }), { 'sidecar.istio.io/inject': 'false', 'linkerd.io/inject': 'disabled' });
  t.like(await annotations({ 'metrics.scrapeAnnotations': 'false', 'podAnnotations.team': 'bots' }), { team: 'bots' });
});

test('the data folder is a PersistentVolumeClaim by default (one pod at a time: Recreate), an emptyDir when persistence is off; a webhook takes its URL and its key from a Secret', async (t) => {
  const mountOf = (objects: KubeObject[]) => {
    const pod = (byKind(objects, 'Deployment')[0] as unknown as Deployment).spec!.template.spec!;
    const mount = pod.containers[0]!.volumeMounts?.find((m) => m.mountPath === '/var/lib/bot-agent');
    return { volume: pod.volumes?.find((v) => v.name === mount?.name), env: pod.containers[0]!.env ?? [] };
  };
  const plain = await renderChart('bots', { 'persistence.enabled': 'false' });
  t.deepEqual(mountOf(plain).volume, { name: 'data', emptyDir: {} });
  t.is(byKind(plain, 'PersistentVolumeClaim').length, 0);
  t.is((byKind(plain, 'Deployment')[0] as unknown as Deployment).spec!.strategy, undefined);
  t.like(mountOf(plain).env.find((e) => e.name === 'AGENT_DATA_DIR'), { value: '/var/lib/bot-agent' });
  t.falsy(mountOf(plain).env.find((e) => e.name === 'AGENT_WEBHOOK_URL'));

  const kept = await renderChart('bots', {
    'persistence.size': '2Gi',
    'webhook.existingSecret': 'hook-key',
  });
  validateAll(t, kept);
  const claim = byKind(kept, 'PersistentVolumeClaim')[0] as unknown as { metadata: { name: string }; spec: { resources: { requests: { storage: string } } } };
  t.is(claim.spec.resources.requests.storage, '2Gi');
  t.deepEqual((byKind(kept, 'Deployment')[0] as unknown as Deployment).spec!.strategy, { type: 'Recreate' });
  // Under Recreate no other pod answers while the old one stops: a short pause (a deleted pod's replacement starts
  // meanwhile), and no longer.
  const recreated = (byKind(kept, 'Deployment')[0] as unknown as Deployment).spec!.template.spec!;
  t.deepEqual(recreated.containers[0]!.lifecycle?.preStop, { sleep: { seconds: 2 } });
  t.is(recreated.terminationGracePeriodSeconds, 2 + 3 + 10);
  // One failed probe takes a stopping agent out of its Service before its port closes (AGENT_SHUTDOWN_DELAY_MS); a
  // runtime that blinks is borne in the agent (AGENT_READY_GRACE_MS), not by the probe's count.
  t.like(recreated.containers[0]!.readinessProbe, { periodSeconds: 1, failureThreshold: 1, timeoutSeconds: 3 });
  t.like(mountOf(kept).env.find((e) => e.name === 'AGENT_SHUTDOWN_DELAY_MS'), { value: '3000' });
  t.like(mountOf(kept).env.find((e) => e.name === 'AGENT_READY_GRACE_MS'), { value: '10000' });
  t.deepEqual(mountOf(kept).volume, { name: 'data', persistentVolumeClaim: { claimName: claim.metadata.name } });
  t.like(mountOf(kept).env.find((e) => e.name === 'AGENT_WEBHOOK_SECRET'), { valueFrom: { secretKeyRef: { name: 'hook-key', key: 'secret' } } });
  t.like(mountOf(kept).env.find((e) => e.name === 'AGENT_WEBHOOK_URL'), { valueFrom: { secretKeyRef: { name: 'hook-key', key: 'url' } } });
  t.false(JSON.stringify(kept).includes('platform.example'), 'no URL in a plain value');
  await t.throwsAsync(renderChart('bots', { 'webhook.url': 'https://platform.example/hooks' }), { message: /webhook.url is no longer read/ });
});

test('with a database: two agents by default, rolled one at a time, spread, kept by a disruption budget, each pausing before it stops; no claim', async (t) => {
  const objects = await renderChart('bots', { 'database.existingSecret': 'history-db' });
  validateAll(t, objects);
  const deployment = byKind(objects, 'Deployment')[0] as unknown as Deployment;
  const spec = deployment.spec!;
  t.is(spec.replicas, 2);
  t.deepEqual(spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
  const pod = spec.template.spec!;
  t.like(pod.topologySpreadConstraints?.[0], { topologyKey: 'kubernetes.io/hostname', maxSkew: 1 });
  const agent = pod.containers[0]!;
  t.deepEqual(agent.lifecycle?.preStop, { sleep: { seconds: 5 } });
  t.true(pod.terminationGracePeriodSeconds! >= 5 + 3 + 8, 'the pause, the answering while not ready and the drain fit in the grace period');
  t.like(agent.env?.find((e) => e.name === 'AGENT_DATABASE_URL'), { valueFrom: { secretKeyRef: { name: 'history-db', key: 'url' } } });
  t.is(byKind(objects, 'PersistentVolumeClaim').length, 0);
  t.deepEqual(pod.volumes?.find((v) => v.name === 'data'), { name: 'data', emptyDir: {} });
  const budget = byKind(objects, 'PodDisruptionBudget')[0] as unknown as { spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } };
  t.is(budget.spec.minAvailable, 1);
  t.deepEqual(budget.spec.selector.matchLabels, spec.selector.matchLabels);
  t.is((byKind(await renderChart('bots', { 'database.existingSecret': 'history-db', replicaCount: '3' }), 'Deployment')[0] as unknown as Deployment).spec!.replicas, 3);
  t.is(byKind(await renderChart(), 'PodDisruptionBudget').length, 0, 'one agent: no budget, which would block every drain');
});

test('the Role follows what is on: without provisioning no create or delete of Deployments, Secrets, claims or helper pods; the agent is told; loopback is no platform unless asked', async (t) => {
  const roleOf = async (set: Record<string, string>) => {
    const objects = await renderChart('bots', set);
    const role = byKind(objects, 'Role')[0] as unknown as Role;
    const env = (byKind(objects, 'Deployment')[0] as unknown as Deployment).spec!.template.spec!.containers[0]!.env ?? [];
    const verbs = (resource: string, group?: string) => role.rules!.filter((rule) => rule.resources?.includes(resource) && (group === undefined || rule.apiGroups?.includes(group))).flatMap((rule) => rule.verbs);
    return { deployments: verbs('deployments'), secrets: verbs('secrets'), claims: verbs('persistentvolumeclaims'), pods: verbs('pods', ''), env };
  };
  const on = await roleOf({});
  t.true(on.deployments.includes('create') && on.deployments.includes('delete') && on.deployments.includes('update'));
  t.deepEqual(on.secrets, ['get', 'create', 'delete', 'deletecollection']);
  t.deepEqual(on.claims, ['get', 'create', 'delete']);
  t.deepEqual(on.pods, ['get', 'create', 'delete', 'list', 'watch'], "backups' helper pods (docs/api.md §20)");
  t.falsy(on.env.find((e) => e.name === 'AGENT_PROVISIONING'));
  const off = await roleOf({ provisioning: 'false' });
  t.deepEqual(off.deployments, ['list', 'watch', 'patch']);
  t.deepEqual(off.secrets, []);
  t.deepEqual(off.claims, []);
  t.deepEqual(off.pods, ['list', 'watch']);
  t.like(off.env.find((e) => e.name === 'AGENT_PROVISIONING'), { value: 'off' });
  t.like(on.env.find((e) => e.name === 'AGENT_LOOPBACK_PLATFORM'), { value: 'off' }, 'on a cluster the platform is the token by default');
  t.falsy((await roleOf({ loopbackPlatform: 'true' })).env.find((e) => e.name === 'AGENT_LOOPBACK_PLATFORM'));
});

test("the console's Ingress, when asked for: under its host, which the agent then trusts for sessions; never without a host or the token", async (t) => {
  const objects = await renderChart('bots', {
    'console.ingress.enabled': 'true',
    'console.ingress.host': 'bots.example.com',
    'console.ingress.tlsSecret': 'bots-tls',
    'console.hosts[0]': 'agent.internal',
    'adminToken.existingSecret': 'agent-token',
  });
  validateAll(t, objects);
  const [ingress] = byKind(objects, 'Ingress') as unknown as Ingress[];
  t.like(ingress?.spec?.rules?.[0], { host: 'bots.example.com', http: { paths: [{ path: '/', backend: { service: { name: 'agent', port: { name: 'http' } } } }] } });
  t.deepEqual(ingress?.spec?.tls, [{ hosts: ['bots.example.com'], secretName: 'bots-tls' }]);
  const env = (byKind(objects, 'Deployment')[0] as unknown as Deployment).spec!.template.spec!.containers[0]!.env ?? [];
  t.like(env.find((e) => e.name === 'AGENT_TRUSTED_HOSTS'), { value: 'agent.internal,bots.example.com' });
  t.deepEqual(byKind(await renderChart(), 'Ingress'), [], 'no Ingress by default');
  await t.throwsAsync(renderChart('bots', { 'console.ingress.enabled': 'true', 'adminToken.existingSecret': 'agent-token' }), { message: /console.ingress.host is required/ });
  await t.throwsAsync(renderChart('bots', { 'console.ingress.enabled': 'true', 'console.ingress.host': 'bots.example.com' }), { message: /needs adminToken.existingSecret/ });
});
