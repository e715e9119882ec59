import { spawnSync } from 'node:child_process';
import test from 'ava';
import { hostname } from 'node:os';
import { CHAT_EVENTS, ConfigError, defaultNode, loadConfig } from '../../src/config.js';

test('defaults follow docs/api.md §5', (t) => {
  t.deepEqual(loadConfig({}), {
    runtime: 'docker',
    host: '0.0.0.0',
    port: 8000,
    dockerHost: 'unix:///var/run/docker.sock',
    namespace: undefined,
    restartTimeoutMs: 60_000,
    adminToken: undefined,
    rateLimit: 6,
    rateWindowMs: 60_000,
    readRate: 20,
    botsNetwork: undefined,
    botsAgentUrl: 'http://agent:8000',
    dataDir: './data',
    backupDir: undefined,
    backupStoresFile: undefined,
    databaseUrl: undefined,
    webhook: undefined,
    trustedHosts: [],
    provisioning: true,
    loopbackPlatform: true,
    connectionsPerAddress: 64,
    identity: 'address',
    proxyAddresses: [],
    readyGraceMs: 0,
    shutdownDelayMs: 0,
    watchdog: true,
    logHistory: { ratePerSecond: 200, retention: { days: 7, botBytes: 100_000_000, totalBytes: 2_048_000_000 } },
    logLevel: 'info',
    node: defaultNode(hostname()),
    nodeUrl: undefined,
    fleetKey: undefined,
    pullTimeoutMs: 300_000,
    registryAuthFile: undefined,
    registries: undefined,
    chats: undefined,
    botChatBase: { telegramApi: 'https://api.telegram.org', events: [...CHAT_EVENTS], consoleUrl: undefined, hosts: ['discord.com', 'discordapp.com', 'hooks.slack.com', 'ntfy.sh'] },
    imagePullSecrets: [],
  });
});

test('a node is named by AGENT_NODE, else by the host\'s name made a node name; on Kubernetes the cluster is one node', (t) => {
  t.is(loadConfig({ AGENT_NODE: 'host-2' }).node, 'host-2');
  t.is(loadConfig({ AGENT_RUNTIME: 'kubernetes' }).node, 'kubernetes');
  t.is(loadConfig({ AGENT_NODE_URL: 'http://10.0.0.2:8000' }).nodeUrl, 'http://10.0.0.2:8000');
  t.is(defaultNode('Build_Host.Example.COM'), 'build-host.example.com');
  t.is(defaultNode('-.-'), 'node');
  t.is(defaultNode('a'.repeat(70)), 'a'.repeat(63));
  for (const bad of ['Host', 'host_2', '-host', 'a'.repeat(64)]) t.throws(() => loadConfig({ AGENT_NODE: bad }), { message: /AGENT_NODE must be a node name/ });
});

test("a bot's own chats: the hosts their URLs may name, in lower case, none at all, and what they take of AGENT_NOTIFY_*", (t) => {
  t.like(loadConfig({ AGENT_NOTIFY_BOT_HOSTS: 'Discord.com, ntfy.example.com:8443', AGENT_NOTIFY_EVENTS: 'exited', AGENT_CONSOLE_URL: 'https://console.example.com' }).botChatBase, {
    hosts: ['discord.com', 'ntfy.example.com:8443'],
    events: ['exited'],
    consoleUrl: 'https://console.example.com',
  });
  t.deepEqual(loadConfig({ AGENT_NOTIFY_BOT_HOSTS: 'none' }).botChatBase.hosts, []);
  t.throws(() => loadConfig({ AGENT_NOTIFY_BOT_HOSTS: 'https://discord.com' }), { instanceOf: ConfigError, message: /^AGENT_NOTIFY_BOT_HOSTS/ });
});

test('pulls: a bounded time in seconds, and a Docker config.json of logins when given', (t) => {
  t.like(loadConfig({ AGENT_PULL_TIMEOUT_S: '20', AGENT_REGISTRY_AUTH: '/etc/bot-agent/config.json' }), { pullTimeoutMs: 20_000, registryAuthFile: '/etc/bot-agent/config.json' });
  t.throws(() => loadConfig({ AGENT_PULL_TIMEOUT_S: '0' }), { instanceOf: ConfigError, message: /^AGENT_PULL_TIMEOUT_S/ });
  t.throws(() => loadConfig({ AGENT_PULL_TIMEOUT_S: '3601' }), { instanceOf: ConfigError, message: /^AGENT_PULL_TIMEOUT_S/ });
  t.deepEqual(loadConfig({ AGENT_REGISTRIES: 'Registry.example.com, 127.0.0.1:5000,docker.io' }).registries, ['registry.example.com', '127.0.0.1:5000', 'docker.io']);
  t.throws(() => loadConfig({ AGENT_REGISTRIES: 'https://registry.example.com' }), { instanceOf: ConfigError, message: /^AGENT_REGISTRIES must be registry hosts/ });
  t.deepEqual(loadConfig({ AGENT_IMAGE_PULL_SECRETS: 'team-registry, hub' }).imagePullSecrets, ['team-registry', 'hub']);
  t.throws(() => loadConfig({ AGENT_IMAGE_PULL_SECRETS: 'Team Registry' }), { instanceOf: ConfigError, message: /^AGENT_IMAGE_PULL_SECRETS must be Secret names/ });
});

test('the readiness grace and the shutdown delay are milliseconds, bounded', (t) => {
  t.like(loadConfig({ AGENT_READY_GRACE_MS: '10000', AGENT_SHUTDOWN_DELAY_MS: '3000' }), { readyGraceMs: 10_000, shutdownDelayMs: 3_000 });
  t.throws(() => loadConfig({ AGENT_SHUTDOWN_DELAY_MS: '60001' }), { instanceOf: ConfigError, message: /^AGENT_SHUTDOWN_DELAY_MS/ });
  t.throws(() => loadConfig({ AGENT_READY_GRACE_MS: '-1' }), { instanceOf: ConfigError, message: /^AGENT_READY_GRACE_MS/ });
});

test("proxies' hops are a comma-separated list of addresses", (t) => {
  t.deepEqual(loadConfig({ AGENT_PROXY_ADDRESSES: '127.0.0.6, 10.0.0.5,FD00::1' }).proxyAddresses, ['127.0.0.6', '10.0.0.5', 'fd00::1']);
  t.throws(() => loadConfig({ AGENT_PROXY_ADDRESSES: 'sidecar.local' }), { instanceOf: ConfigError, message: /^AGENT_PROXY_ADDRESSES must be IP addresses/ });
});

test('identity: by address unless told; by token, or both, on either runtime; nothing else', (t) => {
  t.is(loadConfig({ AGENT_IDENTITY: 'token' }).identity, 'token');
  t.is(loadConfig({ AGENT_IDENTITY: 'address+token' }).identity, 'address+token');
  t.is(loadConfig({ AGENT_RUNTIME: 'kubernetes' }).identity, 'address');
  t.is(loadConfig({ AGENT_RUNTIME: 'kubernetes', AGENT_IDENTITY: 'address+token' }).identity, 'address+token');
  t.throws(() => loadConfig({ AGENT_IDENTITY: 'bearer' }), { instanceOf: ConfigError, message: /^AGENT_IDENTITY must be address, token or address\+token/ });
});

test('loopback is the platform by default only where addresses name bots: under a token identity it is a hop, and on with one is refused, naming both settings', (t) => {
  t.true(loadConfig({}).loopbackPlatform);
  t.false(loadConfig({ AGENT_IDENTITY: 'token' }).loopbackPlatform);
  t.false(loadConfig({ AGENT_IDENTITY: 'address+token' }).loopbackPlatform);
  t.false(loadConfig({ AGENT_PROXY_ADDRESSES: '127.0.0.1' }).loopbackPlatform, 'a hop named on the host itself');
  for (const identity of ['token', 'address+token']) {
    const error = t.throws(() => loadConfig({ AGENT_IDENTITY: identity, AGENT_LOOPBACK_PLATFORM: 'on' }), { instanceOf: ConfigError });
    t.regex(error.message, new RegExp(`^AGENT_LOOPBACK_PLATFORM=on cannot go with AGENT_IDENTITY=${identity.replace('+', '\\+')}`));
  }
  t.regex(t.throws(() => loadConfig({ AGENT_PROXY_ADDRESSES: '10.0.0.5,::1', AGENT_LOOPBACK_PLATFORM: 'on' }))!.message, /^AGENT_LOOPBACK_PLATFORM=on cannot go with ::1 in AGENT_PROXY_ADDRESSES/);
  t.false(loadConfig({ AGENT_IDENTITY: 'token', AGENT_LOOPBACK_PLATFORM: 'off' }).loopbackPlatform);
});

test('trusted hosts are a comma-separated list, read in lower case; provisioning can be turned off', (t) => {
  t.deepEqual(loadConfig({ AGENT_TRUSTED_HOSTS: 'Agent.Internal, platform.local' }).trustedHosts, ['agent.internal', 'platform.local']);
  t.false(loadConfig({ AGENT_PROVISIONING: 'off' }).provisioning);
  t.false(loadConfig({ AGENT_LOOPBACK_PLATFORM: 'off' }).loopbackPlatform);
  t.true(loadConfig({}).watchdog);
  t.false(loadConfig({ AGENT_WATCHDOG: 'off' }).watchdog);
  t.is(loadConfig({ AGENT_CONNECTIONS_PER_ADDRESS: '200' }).connectionsPerAddress, 200);
  t.throws(() => loadConfig({ AGENT_CONNECTIONS_PER_ADDRESS: '0' }), { instanceOf: ConfigError, message: /^AGENT_CONNECTIONS_PER_ADDRESS/ });
});

test('an admin token of 32 characters is taken, a shorter one refused', (t) => {
  t.is(loadConfig({ AGENT_ADMIN_TOKEN: 'a'.repeat(32) }).adminToken, 'a'.repeat(32));
  const error = t.throws(() => loadConfig({ AGENT_ADMIN_TOKEN: 'a'.repeat(31) }), { instanceOf: ConfigError });
  t.regex(error.message, /^AGENT_ADMIN_TOKEN must have at least 32 characters/);
});

test('a webhook needs its secret; with both, deliveries are signed with it', (t) => {
  const error = t.throws(() => loadConfig({ AGENT_WEBHOOK_URL: 'https://platform.example/hooks' }), { instanceOf: ConfigError });
  t.regex(error.message, /^AGENT_WEBHOOK_SECRET is required when AGENT_WEBHOOK_URL is set/);
  t.deepEqual(loadConfig({ AGENT_WEBHOOK_URL: 'https://platform.example/hooks', AGENT_WEBHOOK_SECRET: 'k', AGENT_DATA_DIR: '/srv/agent' }), {
    ...loadConfig({}),
    dataDir: '/srv/agent',
    webhook: { url: 'https://platform.example/hooks', secret: 'k' },
  });
});

test('every variable is read, and an empty one counts as unset', (t) => {
  const config = loadConfig({
    AGENT_RUNTIME: 'kubernetes',
    AGENT_HOST: '127.0.0.1',
    AGENT_PORT: '9000',
    DOCKER_HOST: 'tcp://10.0.0.1:2375',
    AGENT_NAMESPACE: 'bots',
    AGENT_RESTART_TIMEOUT_MS: '1500',
    AGENT_ADMIN_TOKEN: '',
    AGENT_DATABASE_URL: 'postgres://agent:secret@db.internal:5432/history',
  });
  t.like(config, {
    databaseUrl: 'postgres://agent:secret@db.internal:5432/history',
    runtime: 'kubernetes',
    host: '127.0.0.1',
    port: 9000,
    dockerHost: 'tcp://10.0.0.1:2375',
    namespace: 'bots',
    restartTimeoutMs: 1500,
    adminToken: undefined,
  });
  t.true(Object.isFrozen(config));
});

const bad: Array<[string, string]> = [
  ['AGENT_RUNTIME', 'podman'],
  ['AGENT_PORT', 'eighty'],
  ['AGENT_PORT', '70000'],
  ['AGENT_PORT', '80.5'],
  ['AGENT_HOST', 'a host'],
  ['DOCKER_HOST', '/var/run/docker.sock'],
  ['AGENT_NAMESPACE', 'Bots_Here'],
  ['AGENT_RESTART_TIMEOUT_MS', '0'],
  ['AGENT_RESTART_TIMEOUT_MS', 'soon'],
  ['AGENT_ADMIN_TOKEN', 'two words'],
  ['AGENT_RATE_LIMIT', '0'],
  ['AGENT_RATE_WINDOW_MS', '10'],
  ['AGENT_READ_RATE', '0'],
  ['AGENT_READ_RATE', '2.5'],
  ['AGENT_BOTS_NETWORK', 'no spaces please'],
  ['AGENT_BOTS_AGENT_URL', 'agent:8000'],
  ['AGENT_WEBHOOK_URL', 'platform.example/hooks'],
  ['AGENT_ADMIN_TOKEN', 'short-token'],
  ['AGENT_FLEET_KEY', 'short-key'],
  ['AGENT_TRUSTED_HOSTS', 'http://agent:8000'],
  ['AGENT_PROVISIONING', 'false'],
  ['AGENT_DATABASE_URL', 'mysql://agent@db/history'],
  ['AGENT_LOOPBACK_PLATFORM', 'no'],
  ['AGENT_WATCHDOG', 'false'],
  ['AGENT_IDENTITY', 'cookie'],
];

test('a secret in a URL never reaches a message: a webhook URL with credentials is refused, a database URL that cannot be read is named, not shown', (t) => {
  for (const [name, value] of [
    ['AGENT_WEBHOOK_URL', 'https://hook-user:hook-p4ssword@platform.example/hooks'],
    ['AGENT_DATABASE_URL', 'postgres://agent:p4ss/word#x@db.internal:5432/history'],
  ] as const) {
    const error = t.throws(() => loadConfig({ [name]: value, AGENT_WEBHOOK_SECRET: 'k' }), { instanceOf: ConfigError });
    t.true(error.message.startsWith(name), error.message);
    t.notRegex(error.message, /p4ss/, 'the password was repeated');
  }
  t.regex(t.throws(() => loadConfig({ AGENT_WEBHOOK_URL: 'https://u:p4ss@platform.example/', AGENT_WEBHOOK_SECRET: 'k' }))!.message, /must not carry a user or password/);
  const run = spawnSync(process.execPath, ['--import=tsx', 'src/main.ts'], {
    env: { ...process.env, AGENT_DATABASE_URL: 'postgres://agent:p4ss/word?x@db.internal/history' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  t.is(run.status, 1);
  t.regex(run.stderr, /^bot-agent: AGENT_DATABASE_URL cannot be read as a URL/);
  t.notRegex(run.stderr + run.stdout, /p4ss/);
});

for (const [name, value] of bad) {
  test(`${name}=${value} is refused with a message naming ${name}`, (t) => {
    const error = t.throws(() => loadConfig({ [name]: value }), { instanceOf: ConfigError });
    t.true(error.message.startsWith(name), error.message);
  });
}

test('the agent refuses a bad value at start with one line and exit code 1', (t) => {
  const run = spawnSync(process.execPath, ['--import=tsx', 'src/main.ts'], {
    env: { ...process.env, AGENT_PORT: 'eighty' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  t.is(run.status, 1);
  t.is(run.stderr, 'bot-agent: AGENT_PORT must be a whole number from 0 to 65535\n');
  t.is(run.stdout, '');
});

test('AGENT_LOG_LEVEL takes a level by name; another word stops the agent, naming the variable', (t) => {
  t.is(loadConfig({ AGENT_LOG_LEVEL: 'debug' }).logLevel, 'debug');
  t.throws(() => loadConfig({ AGENT_LOG_LEVEL: 'loud' }), { instanceOf: ConfigError, message: /^AGENT_LOG_LEVEL must be one of silent, fatal, error, warn, info, debug, trace/ });
});
