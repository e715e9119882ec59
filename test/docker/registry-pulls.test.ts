import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { pino } from 'pino';
import { readRegistryLogins } from '../../src/provisioning/registry-credentials.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';
import { pushedImage, REGISTRY_LOGIN, testRegistry } from '../helpers/registry.js';
import { openStream } from '../helpers/sse-client.js';

// Creates whose image the engine lacks pull it from a real registry on loopback (Distribution's, htpasswd logins).
const fixture = new DockerFixture();
const logLines: string[] = [];
const WRONG = { username: 'botagent', password: 'not-the-password-0123' };
let agent: ProvisioningAgent;
let configured: ProvisioningAgent;
/** An agent told no registries (AGENT_REGISTRIES unset): it pulls from any but loopback, private and link-local ones. */
let unlisted: ProvisioningAgent;
let work: string;
let image: string;
/** A registry that takes connections and never answers: a pull from it is too slow. */
const silent = createServer((socket: Socket) => socket.on('error', () => undefined));
/** An internal page on loopback that says it is a registry: every request it takes is counted. */
const PAGE_SECRET = 'internal-admin-page-secret-7781';
let pageRequests = 0;
const page = createHttpServer((_req, res) => {
  pageRequests += 1;
  res.writeHead(500, { 'content-type': 'text/html' }).end(`<html><body>${PAGE_SECRET} ${'y'.repeat(5_000)}</body></html>`);
});
const pageAt = (): string => `127.0.0.1:${(page.address() as AddressInfo).port}`;

test.before(async () => {
  await fixture.ready();
  work = await mkdtemp(join(tmpdir(), 'bot-agent-pulls-'));
  image = await pushedImage(fixture.docker, 'pull');
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  // Every loopback registry this file pulls from is listed, as an operator lists a local registry.
  const registries = [testRegistry(), '127.0.0.1:9', `127.0.0.1:${(silent.address() as AddressInfo).port}`, pageAt()];
  agent = await provisioningAgent(fixture, 'address', { logger: pino(lineSink(logLines)), pulls: { pullTimeoutMs: 3_000, registries } });
  unlisted = await provisioningAgent(fixture, 'address');
  // The operator's logins, as `docker login` writes them.
  const auth = Buffer.from(`${REGISTRY_LOGIN.username}:${REGISTRY_LOGIN.password}`).toString('base64');
  await writeFile(join(work, 'config.json'), JSON.stringify({ auths: { [`http://${testRegistry()}`]: { auth } } }));
  configured = await provisioningAgent(fixture, 'address', {
    pulls: { registryLogins: readRegistryLogins(join(work, 'config.json')), registries: [testRegistry()] },
  });
});

test.after.always(async () => {
  await agent?.close();
  await configured?.close();
  await unlisted?.close();
  silent.close();
  page.close();
  await fixture.cleanup();
  await rm(work, { recursive: true, force: true });
});

/** A create of a new bot of `image` through `through`, removed again when the test ends. */
async function create(t: { teardown(fn: () => Promise<void>): void }, through: ProvisioningAgent, extra: Record<string, unknown>) {
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const body = { bot_id: id, user_id: 'user_9', template: 'telegram', token: 'tok-never-shown', command: ['sleep', '1000'], ...extra };
  return { id, reply: await call(through.server, '/api/admin/bots', { body }) };
}

const imageOnEngine = async (name: string): Promise<boolean> =>
  fixture.docker.getImage(name).inspect().then(() => true, () => false);

test("an image only the registry holds is pulled with the create's login, and the bot starts; the pull is told as events", async (t) => {
  const events = await openStream(agent.server, '/api/events');
  t.teardown(() => events.close());
  const { id, reply } = await create(t, agent, { image, registry_auth: REGISTRY_LOGIN });
  t.is(reply.status, 201, reply.text);
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running);
  t.true(await imageOnEngine(image));
  const pulling = await events.next((e) => e.event === 'pulling' && e.data.bot_id === id);
  t.like(pulling.data, { image, bytes: 0 });
  const pulled = await events.next((e) => e.event === 'pulled' && e.data.bot_id === id);
  t.is(pulled.data.image, image);
  t.true(typeof pulled.data.duration_ms === 'number');
  t.false(logLines.some((line) => line.includes(REGISTRY_LOGIN.password)), 'the login is never logged');
});

test("a create that brings no login pulls with the operator's (AGENT_REGISTRY_AUTH, a Docker config.json)", async (t) => {
  const own = await pushedImage(fixture.docker, 'configured');
  const { id, reply } = await create(t, configured, { image: own });
  t.is(reply.status, 201, reply.text);
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running);
});

test('an agent told its registries (AGENT_REGISTRIES) pulls from no other', async (t) => {
  const { id, reply } = await create(t, configured, { image: '127.0.0.1:9/tests/elsewhere:v1' });
  t.is(reply.status, 422, reply.text);
  t.is(reply.body?.msg, 'image 127.0.0.1:9/tests/elsewhere:v1 is not on the engine, and its registry 127.0.0.1:9 is not one of AGENT_REGISTRIES, so it is not pulled');
  t.false(await fixture.docker.getContainer(id).inspect().then(() => true, () => false));
});

test.serial("with no AGENT_REGISTRIES, an image of a loopback, private or link-local registry is refused before the engine calls it", async (t) => {
  for (const registry of [pageAt(), `localhost:${(page.address() as AddressInfo).port}`, '10.1.2.3:5000', '192.168.7.7', '169.254.169.254', '172.17.0.1:5000', '0.0.0.0:5000']) {
    const name = `${registry}/tests/internal:v1`;
    const { id, reply } = await create(t, unlisted, { image: name });
    t.is(reply.status, 422, `${name}: ${reply.text}`);
    t.is(reply.body?.msg, `image ${name} is not on the engine, and its registry ${registry} is a loopback, private or link-local address, pulled from only when AGENT_REGISTRIES lists it`);
    t.false(await fixture.docker.getContainer(id).inspect().then(() => true, () => false));
  }
  t.is(pageRequests, 0, 'the engine called the internal address');
});

test.serial("a registry's own page never comes back: not in the answer, nor in the pull-failed event", async (t) => {
  const events = await openStream(agent.server, '/api/events');
  t.teardown(() => events.close());
  const { id, reply } = await create(t, agent, { image: `${pageAt()}/tests/page:v1` });
  t.is(reply.status, 502, reply.text);
  t.true(pageRequests > 0, 'the listed registry was not asked');
  t.regex(String(reply.body?.msg), /could not be reached or failed the pull: /);
  t.false(reply.text.includes(PAGE_SECRET), reply.text);
  t.false(reply.text.includes('yyyy'), reply.text);
  const failed = await events.next((e) => e.event === 'pull-failed' && e.data.bot_id === id);
  t.false(JSON.stringify(failed.data).includes(PAGE_SECRET));
});

test('each way a pull fails has its own status and words, leaves no container, and is told as pull-failed', async (t) => {
  const events = await openStream(agent.server, '/api/events');
  t.teardown(() => events.close());
  const slow = `127.0.0.1:${(silent.address() as AddressInfo).port}/tests/slow:v1`;
  // Its own image: the other tests pull theirs meanwhile.
  const refused = await pushedImage(fixture.docker, 'refused');
  const [repo] = refused.split(':v1');
  const cases = [
    { image: `${repo}:no-such-tag`, registry_auth: REGISTRY_LOGIN, status: 422, msg: /^image \S+:no-such-tag was not found in its registry: .*manifest unknown/ },
    { image: refused, registry_auth: WRONG, status: 403, msg: /^the registry of image \S+ refused the pull's credentials .*: .*unauthorized/ },
    { image: refused, registry_auth: undefined, status: 403, msg: /refused the pull's credentials .*no basic auth credentials/ },
    { image: '127.0.0.1:9/tests/nowhere:v1', registry_auth: undefined, status: 502, msg: /^the registry of image 127\.0\.0\.1:9\/tests\/nowhere:v1 could not be reached or failed the pull: .*connection refused/ },
    { image: slow, registry_auth: undefined, status: 504, msg: /^pull of image \S+ took longer than 3 s \(AGENT_PULL_TIMEOUT_S\); it was abandoned/ },
  ];
  for (const { image: name, registry_auth, status, msg } of cases) {
    const { id, reply } = await create(t, agent, { image: name, registry_auth });
    t.is(reply.status, status, `${name}: ${reply.text}`);
    t.like(reply.body, { ok: false });
    t.regex(String(reply.body?.msg), msg);
    t.false(String(reply.body?.msg).includes(WRONG.password), 'the login is never answered back');
    t.false(await fixture.docker.getContainer(id).inspect().then(() => true, () => false), `${name}: no container left`);
    const failed = await events.next((e) => e.event === 'pull-failed' && e.data.bot_id === id);
    t.is(failed.data.message, reply.body?.msg);
  }
  t.false(await imageOnEngine(refused), 'no refused pull left the image behind');
  t.false(logLines.some((line) => line.includes(WRONG.password)), 'the login is never logged');
});

test('a deploy whose pull fails takes no revision number: the bot runs on as it was, and the next deploy is revision 2', async (t) => {
  const events = await openStream(agent.server, '/api/events');
  t.teardown(() => events.close());
  const { id, reply } = await create(t, agent, { image: TEST_IMAGE });
  t.is(reply.status, 201, reply.text);
  const before = (await fixture.docker.getContainer(id).inspect()).Id;
  const [repo] = image.split(':v1');
  for (const missing of [`${repo}:no-such-tag`, `${repo}:nor-this-one`]) {
    const deploy = await call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { image: missing, registry_auth: REGISTRY_LOGIN } });
    t.is(deploy.status, 422, deploy.text);
    await events.next((e) => e.event === 'pull-failed' && e.data.bot_id === id);
  }
  const revisions = async () => (await call(agent.server, `/api/bots/${id}/revisions`)).body as { revisions: { revision: number; outcome: string }[]; current: number };
  t.deepEqual((await revisions()).revisions.map((one) => one.revision), [1], 'no revision for either');
  const container = await fixture.docker.getContainer(id).inspect();
  t.is(container.Id, before, 'the same run');
  t.true(container.State.Running);
  const good = await call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { env: { MODE: 'two' }, min_ready_s: 0 } });
  t.is(good.status, 202, good.text);
  t.is(good.body?.revision, 2);
});

test('a configured login file that cannot be read stops the agent, naming the variable', (t) => {
  t.throws(() => readRegistryLogins(join(work, 'missing.json')), { message: /^AGENT_REGISTRY_AUTH: cannot read .*missing\.json as a Docker config\.json/ });
});
