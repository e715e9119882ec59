import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { promisify } from 'node:util';
import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { fleetNodeEnv } from '../helpers/fleet-node-env.js';
import { freePort } from '../helpers/free-port.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { PrivateEngine } from '../helpers/private-engine.js';

// Agent-to-agent calls over TLS, as docs/fleet.md says to run them: node-b's agent behind a TLS terminator whose
// certificate a CA of the operator's own signed, its AGENT_NODE_URL https://; node-a's agent (a process, as an
// operator runs it) trusts that CA through NODE_EXTRA_CA_CERTS, and one that does not is refused the connection.
const run = promisify(execFile);
const fixture = new DockerFixture();
const engine = new PrivateEngine('fleet-tls');
const FLEET_KEY = 'fleet-key-tls-0123456789abcdef0123456789ab';
const botB = `bot_${process.pid}_1_fleettlsb`;
let work: string;
let nodeB: TestAgent;
let secureConnections = 0;
const terminator = { close: (): void => undefined };

/** A CA, and a certificate it signed for localhost and 127.0.0.1 (openssl, as an operator would make them). */
async function certificates(dir: string): Promise<{ ca: string; key: string; cert: string }> {
  const at = (name: string) => join(dir, name);
  await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('ca.key'), '-out', at('ca.pem'), '-days', '2', '-subj', '/CN=bot-agent test fleet CA']);
  await run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('node.key'), '-out', at('node.csr'), '-subj', '/CN=localhost']);
  await writeFile(at('san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  await run('openssl', ['x509', '-req', '-in', at('node.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at('node.pem'), '-days', '2', '-extfile', at('san.ext')]);
  return { ca: at('ca.pem'), key: await readFile(at('node.key'), 'utf8'), cert: await readFile(at('node.pem'), 'utf8') };
}

let databaseUrl: string;
let ca: string;
let tlsPort: number;

test.before(async () => {
  await fixture.ready();
  // A bot of node-a's own: its agent lists it once its engine's index is built.
  await fixture.runBot();
  work = await mkdtemp(join(tmpdir(), 'bot-agent-fleet-tls-'));
  const made = await certificates(work);
  ca = made.ca;
  await engine.start();
  await engine.withTestImage(fixture.docker);
  await engine.runBot(botB, "echo 'hello over tls'; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done");
  databaseUrl = await freshDatabase();
  const portB = await freePort();
  // The terminator: TLS in, the agent's plain HTTP out, byte for byte (as stunnel or a proxy's TCP mode does).
  const tls = createTlsServer({ key: made.key, cert: made.cert }, (secure) => {
    secureConnections += 1;
    const plain = connect(portB, '127.0.0.1');
    secure.pipe(plain).pipe(secure);
    secure.on('error', () => plain.destroy());
    plain.on('error', () => secure.destroy());
  });
  tls.listen(0, '127.0.0.1');
  await once(tls, 'listening');
  tlsPort = (tls.address() as AddressInfo).port;
  terminator.close = () => tls.close();
  nodeB = await startAgent(createDockerDriver({ dockerHost: engine.dockerHost }), { databaseUrl, node: 'node-b', nodeUrl: `https://localhost:${tlsPort}`, fleetKey: FLEET_KEY, port: portB });
});

test.after.always(async () => {
  terminator.close();
  await nodeB?.close();
  await engine.destroy();
  await fixture.cleanup();
  await dropDatabases();
  if (work) await rm(work, { recursive: true, force: true });
});

/** node-a's agent as a process beside the shared engine, in the fleet; `trusting`: the CA is in NODE_EXTRA_CA_CERTS. */
async function nodeA(t: import('ava').ExecutionContext, trusting: boolean) {
  const port = await freePort();
  const agent = await runAgentProcess({
    ...fleetNodeEnv({ name: trusting ? 'node-a' : 'node-c', port, dataDir: join(work, `node-a-${trusting}`), databaseUrl, fleetKey: FLEET_KEY }),
    ...(trusting ? { NODE_EXTRA_CA_CERTS: ca } : {}),
  });
  t.teardown(() => agent.process.kill('SIGKILL'));
  const at = `http://127.0.0.1:${agent.port}`;
  // Its own bots listed (its engine's index built) and node-b seen alive with its bot: a call for it is passed on.
  const ready = async () => {
    const nodes = ((await (await fetch(`${at}/api/admin/nodes`)).json()) as { nodes?: { node: string; alive: boolean; bots: number; self: boolean }[] }).nodes ?? [];
    return nodes.some((node) => node.node === 'node-b' && node.alive && node.bots === 1) && nodes.some((node) => node.self && node.bots > 0);
  };
  t.true(await eventually(ready, 20_000, 200), 'node-b not listed with its bot');
  return at;
}

test.serial("a platform call at node-a for node-b's bot goes over TLS to node-b's https:// address, trusted through the operator's CA", async (t) => {
  const at = await nodeA(t, true);
  const before = secureConnections;
  const reply = await fetch(`${at}/api/bots/${botB}`);
  const body = (await reply.json()) as { bot?: { node?: string; state?: string } };
  t.is(reply.status, 200, JSON.stringify(body));
  t.like(body.bot, { node: 'node-b', state: 'running' });
  t.is(reply.headers.get('x-bot-agent-node'), 'node-b');
  t.true(secureConnections > before, 'the call did not go through the TLS terminator');
  const logs = await fetch(`${at}/api/bots/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bot_id: botB, lines: 10 }) });
  t.regex(String(((await logs.json()) as { logs?: string }).logs), /hello over tls/);
});

test.serial("an agent that does not trust node-b's CA is refused the connection: 503, nothing sent in the clear", async (t) => {
  const at = await nodeA(t, false);
  const reply = await fetch(`${at}/api/bots/${botB}`);
  const body = (await reply.json()) as { msg?: string };
  t.is(reply.status, 503, JSON.stringify(body));
  t.regex(String(body.msg), /node node-b does not answer: .*(CERT|certificate|SELF_SIGNED|UNABLE_TO_VERIFY)/i);
});
