import { hostname } from 'node:os';
import { object, string, ValidationError } from 'yup';
import { isHostItself } from './loopback.js';
import { wholeNumber } from './whole-number.js';

/** What the log history keeps (docs/api.md §21): a bot's share of lines a second, and the retention in days and bytes. */
export interface LogHistoryConfig {
  readonly ratePerSecond: number;
  /** A VictoriaLogs every line is shipped to (Loki's push API) and searched in (LogsQL): AGENT_LOG_DATABASE_URL. */
  readonly databaseUrl?: string | undefined;
  /** The shipping's bounds where they are not the defaults (tests): lines held at most, and how long a gap goes unsaid. */
  readonly shipping?: { readonly maxPending?: number; readonly gapMs?: number } | undefined;
  readonly retention: { readonly days: number; readonly botBytes: number; readonly totalBytes: number };
}

/** The agent's configuration, read once at start (docs/api.md §5). */
export interface Config {
  readonly runtime: 'docker' | 'kubernetes';
  readonly host: string;
  readonly port: number;
  readonly dockerHost: string;
  readonly namespace: string | undefined;
  readonly restartTimeoutMs: number;
  readonly adminToken: string | undefined;
  /** At most this many restarts, stops and starts of one bot ... */
  readonly rateLimit: number;
  /** ... within any window of this many milliseconds. */
  readonly rateWindowMs: number;
  /** Reads a bot may make of itself per second, in bursts of twice that. */
  readonly readRate: number;
  /** The Docker network created bots join; the engine's default when undefined. */
  readonly botsNetwork: string | undefined;
  /** PLATFORM_AGENT_URL given to created bots. */
  readonly botsAgentUrl: string;
  /** Where exit records, events and pending webhook deliveries are kept. */
  readonly dataDir: string;
  /** Every bot's log history (docs/api.md §21): its share of lines a second and its retention; undefined: none kept. */
  readonly logHistory?: LogHistoryConfig | undefined;
  /** The agent's backup folder (docs/api.md §20); `<dataDir>/backups` when unset. */
  readonly backupDir?: string | undefined;
  /** A JSON file of the S3-compatible stores backups may be copied to (docs/api.md §20). */
  readonly backupStoresFile?: string | undefined;
  /** A PostgreSQL database that keeps them instead, shared by several agents (docs/api.md §11). */
  readonly databaseUrl: string | undefined;
  /** Where events are POSTed, and the key they are signed with; both or neither. */
  readonly webhook: { readonly url: string; readonly secret: string } | undefined;
  /** Host names, beyond loopback's, that a loopback caller may name in `Host` (lower case). */
  readonly trustedHosts: readonly string[];
  /** Whether the admin API may create and remove bots. */
  readonly provisioning: boolean;
  /** Whether a loopback caller (127.0.0.1 or ::1, no web page's request) is the platform. */
  readonly loopbackPlatform: boolean;
  /** Connections one address may hold open at once (the host itself is not counted). */
  readonly connectionsPerAddress: number;
  /** What names a bot: its address, its token (`Authorization: Bot`), or both, which must agree (docs/api.md §4). */
  readonly identity: Identity;
  /** Addresses that are proxies' hops (a mesh's sidecar, an ingress): many bots share each (docs/api.md §4). */
  readonly proxyAddresses: readonly string[];
  /** How long the runtime may not answer before `/readyz` says 503 (docs/api.md §5). */
  readonly readyGraceMs: number;
  /** After SIGTERM, how long the agent answers on, `/readyz` saying 503, before it stops taking calls. */
  readonly shutdownDelayMs: number;
  /** Whether the watchdog restarts bots unhealthy past their grace (docs/api.md §13); health is judged and reported either way. */
  readonly watchdog: boolean;
  /** The least level a log line is written at (docs/operating.md). */
  readonly logLevel: LogLevel;
  /** This agent's node in a fleet (AGENT_NODE, docs/api.md §17): the host's name unless set. */
  readonly node: string;
  /** Where the fleet's other agents reach this one (AGENT_NODE_URL); undefined: not said. */
  readonly nodeUrl: string | undefined;
  /** The key the fleet's agents pass the platform's calls on with (AGENT_FLEET_KEY); undefined: none are. */
  readonly fleetKey: string | undefined;
  /** How long a pull of a bot's image may take (docs/api.md §14). */
  readonly pullTimeoutMs: number;
  /** A Docker config.json whose logins pulls use (docs/api.md §14); undefined: only a create's own. */
  readonly registryAuthFile: string | undefined;
  /** The registries pulls may come from (docs/api.md §14); undefined: any. */
  readonly registries: readonly string[] | undefined;
  /** Secrets every bot's pod pulls its image with, on Kubernetes (docs/api.md §14). */
  readonly imagePullSecrets: readonly string[];
  /** The chats the owner is told in (docs/api.md §16); undefined: none. */
  readonly chats: ChatConfig | undefined;
  /** What each bot's own chats take from the agent's configuration (docs/api.md §16). */
  readonly botChatBase: BotChatBase;
}

/** What a bot's own chats take from the agent's configuration: the Telegram API, the default events, the console. */
export interface BotChatBase {
  readonly telegramApi: string;
  readonly events: readonly string[];
  readonly consoleUrl: string | undefined;
  /** The hosts a bot's own chat URLs may name (AGENT_NOTIFY_BOT_HOSTS, lower case, with a port where given). */
  readonly hosts: readonly string[];
}

/** The hosts a bot's own chat URLs may name unless AGENT_NOTIFY_BOT_HOSTS says otherwise: the services' own. */
export const BOT_CHAT_HOSTS = ['discord.com', 'discordapp.com', 'hooks.slack.com', 'ntfy.sh'] as const;

/** The events told in chats unless AGENT_NOTIFY_EVENTS says otherwise: those an owner acts on. */
/** The levels a log line may be written at, least verbose first (pino's names); `silent` writes none. */
export const LOG_LEVELS = ['silent', 'fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const CHAT_EVENTS = ['crash-looping', 'unhealthy', 'restarted', 'deploy-failed', 'rolled-back', 'deploy-succeeded', 'pull-failed', 'given-up', 'schedule-failed', 'restore-failed', 'backup-verify-failed', 'data-over-size', 'alert'] as const;

/** A bot's chats' base with nothing of AGENT_NOTIFY_* set. */
export const DEFAULT_BOT_CHAT_BASE: BotChatBase = Object.freeze({
  telegramApi: 'https://api.telegram.org',
  events: CHAT_EVENTS,
  consoleUrl: undefined,
  hosts: BOT_CHAT_HOSTS,
});

/** The chats the owner is told in (AGENT_NOTIFY_*, docs/api.md §16); each secret stays here. */
export interface ChatConfig {
  readonly discordUrl?: string | undefined;
  readonly slackUrl?: string | undefined;
  readonly telegram?: { readonly api: string; readonly token: string; readonly chatId: string } | undefined;
  readonly ntfy?: { readonly url: string; readonly token: string | undefined } | undefined;
  /** The event types told. */
  readonly events: readonly string[];
  /** The console's address, for each message's link to the bot's page. */
  readonly consoleUrl?: string | undefined;
}

/** A node's name (AGENT_NODE, docs/api.md §17): a host name's letters, lower case. */
export const NODE_NAME = /^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/;

/** The node of a Kubernetes runtime unless AGENT_NODE says otherwise: every agent of the cluster names it alike. */
export const KUBERNETES_NODE = 'kubernetes';

/** The host's name as a node name: lower case, anything else a dash; `node` where nothing is left. */
export function defaultNode(host: string = hostname()): string {
  const name = host.toLowerCase().replace(/[^a-z0-9.-]/g, '-').replace(/^[.-]+|[.-]+$/g, '').slice(0, 63).replace(/[.-]+$/, '');
  return NODE_NAME.test(name) ? name : 'node';
}

/** What names a bot (AGENT_IDENTITY). */
export type Identity = 'address' | 'token' | 'address+token';

/** The shortest admin token the agent accepts (docs/api.md §4 rule 5). */
export const MIN_ADMIN_TOKEN = 32;

/** Whether a value, when given, is a URL that can be read. */
const readable = (value: string | undefined): boolean => value === undefined || URL.canParse(value);

/** An http:// or https:// URL setting, whose value (it may hold a secret) no message repeats. */
function httpUrl(name: string) {
  return string()
    .matches(/^https?:\/\/[^\s/]+(\/\S*)?$/, `${name} must be an http:// or https:// URL`)
    .test('url', `${name} cannot be read as a URL`, readable);
}

/** A configuration value that cannot be used; its message names the variable. */
export class ConfigError extends Error {}

const env = object({
  AGENT_RUNTIME: string()
    .oneOf(['docker', 'kubernetes'] as const, 'AGENT_RUNTIME must be docker or kubernetes')
    .default('docker'),
  AGENT_HOST: string().matches(/^[\w.:-]+$/, 'AGENT_HOST must be an IP address or host name').default('0.0.0.0'),
  AGENT_PORT: wholeNumber('AGENT_PORT', 0, 65535).default(8000),
  DOCKER_HOST: string()
    .matches(/^(unix|tcp|http|https):\/\/\S+$/, 'DOCKER_HOST must look like unix:///path or tcp://host:port')
    .default('unix:///var/run/docker.sock'),
  AGENT_NAMESPACE: string().matches(
    /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
    'AGENT_NAMESPACE must be a Kubernetes namespace name',
  ),
  AGENT_RESTART_TIMEOUT_MS: wholeNumber('AGENT_RESTART_TIMEOUT_MS', 1, 3_600_000, 'milliseconds').default(60_000),
  AGENT_ADMIN_TOKEN: string()
    .matches(/^\S+$/, 'AGENT_ADMIN_TOKEN must not contain white space')
    .min(MIN_ADMIN_TOKEN, `AGENT_ADMIN_TOKEN must have at least ${MIN_ADMIN_TOKEN} characters (e.g. openssl rand -hex 24)`),
  AGENT_RATE_LIMIT: wholeNumber('AGENT_RATE_LIMIT', 1, 10_000, 'operations').default(6),
  AGENT_RATE_WINDOW_MS: wholeNumber('AGENT_RATE_WINDOW_MS', 1_000, 86_400_000, 'milliseconds').default(60_000),
  AGENT_READ_RATE: wholeNumber('AGENT_READ_RATE', 1, 10_000, 'reads a second').default(20),
  AGENT_BOTS_NETWORK: string().matches(/^[\w][\w.-]{0,127}$/, 'AGENT_BOTS_NETWORK must be a Docker network name'),
  AGENT_DATA_DIR: string().default('./data'),
  AGENT_BACKUP_DIR: string().matches(/^\S(.*\S)?$/, 'AGENT_BACKUP_DIR must be a folder, without spaces around it'),
  AGENT_BACKUP_STORES: string().matches(/^\S(.*\S)?$/, 'AGENT_BACKUP_STORES must be a file, without spaces around it'),
  AGENT_DATABASE_URL: string()
    .matches(/^postgres(ql)?:\/\/\S+$/, 'AGENT_DATABASE_URL must be a PostgreSQL URL, e.g. postgres://user:password@host:5432/database')
    // Its value is never repeated: it holds a password.
    .test('url', 'AGENT_DATABASE_URL cannot be read as a URL: percent-encode / # ? @ and : in its user and password (%2F %23 %3F %40 %3A)', readable),
  AGENT_WEBHOOK_URL: string()
    .matches(/^https?:\/\/[^\s/]+(\/\S*)?$/, 'AGENT_WEBHOOK_URL must be an http:// or https:// URL')
    .test('url', 'AGENT_WEBHOOK_URL cannot be read as a URL', readable)
    .test(
      'credentials',
      'AGENT_WEBHOOK_URL must not carry a user or password (fetch refuses such a URL, and it would reach the log): the receiver checks each delivery by its X-Bot-Agent-Signature, signed with AGENT_WEBHOOK_SECRET',
      (url) => url === undefined || (URL.parse(url)?.username === '' && URL.parse(url)?.password === ''),
    ),
  AGENT_WEBHOOK_SECRET: string().when('AGENT_WEBHOOK_URL', {
    is: (url: string | undefined) => url !== undefined,
    then: (secret) => secret.required('AGENT_WEBHOOK_SECRET is required when AGENT_WEBHOOK_URL is set: it signs each delivery'),
  }),
  AGENT_TRUSTED_HOSTS: string().matches(
    /^[A-Za-z0-9.-]+(\s*,\s*[A-Za-z0-9.-]+)*$/,
    'AGENT_TRUSTED_HOSTS must be host names separated by commas, e.g. agent.internal,platform.local',
  ),
  AGENT_PROVISIONING: string().oneOf(['on', 'off'] as const, 'AGENT_PROVISIONING must be on or off').default('on'),
  // No default here: it follows AGENT_IDENTITY (loopbackPlatformOf).
  AGENT_LOOPBACK_PLATFORM: string().oneOf(['on', 'off'] as const, 'AGENT_LOOPBACK_PLATFORM must be on or off'),
  AGENT_WATCHDOG: string().oneOf(['on', 'off'] as const, 'AGENT_WATCHDOG must be on or off').default('on'),
  AGENT_LOG_HISTORY: string().oneOf(['on', 'off'] as const, 'AGENT_LOG_HISTORY must be on or off').default('on'),
  AGENT_LOG_HISTORY_DAYS: wholeNumber('AGENT_LOG_HISTORY_DAYS', 1, 3_650, 'days').default(7),
  AGENT_LOG_HISTORY_BOT_MB: wholeNumber('AGENT_LOG_HISTORY_BOT_MB', 1, 1_000_000, 'MB').default(100),
  AGENT_LOG_HISTORY_MB: wholeNumber('AGENT_LOG_HISTORY_MB', 1, 10_000_000, 'MB').default(2_048),
  AGENT_LOG_HISTORY_RATE: wholeNumber('AGENT_LOG_HISTORY_RATE', 1, 100_000, 'lines a second').default(200),
  AGENT_LOG_DATABASE_URL: httpUrl('AGENT_LOG_DATABASE_URL'),
  AGENT_LOG_LEVEL: string().oneOf(LOG_LEVELS, `AGENT_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`).default('info'),
  AGENT_NODE: string().matches(NODE_NAME, 'AGENT_NODE must be a node name: lower-case letters, digits, dots and dashes, at most 63, e.g. host-2'),
  AGENT_NODE_URL: httpUrl('AGENT_NODE_URL'),
  AGENT_FLEET_KEY: string()
    .matches(/^\S+$/, 'AGENT_FLEET_KEY must not contain white space')
    .min(MIN_ADMIN_TOKEN, `AGENT_FLEET_KEY must have at least ${MIN_ADMIN_TOKEN} characters (e.g. openssl rand -hex 24), the same on every agent of the fleet`),
  AGENT_IDENTITY: string()
    .oneOf(['address', 'token', 'address+token'] as const, 'AGENT_IDENTITY must be address, token or address+token')
    .default('address'),
  AGENT_PROXY_ADDRESSES: string().matches(
    /^[0-9A-Fa-f.:]+(\s*,\s*[0-9A-Fa-f.:]+)*$/,
    'AGENT_PROXY_ADDRESSES must be IP addresses separated by commas, e.g. 127.0.0.6,10.0.0.5',
  ),
  AGENT_READY_GRACE_MS: wholeNumber('AGENT_READY_GRACE_MS', 0, 600_000, 'milliseconds').default(0),
  AGENT_SHUTDOWN_DELAY_MS: wholeNumber('AGENT_SHUTDOWN_DELAY_MS', 0, 60_000, 'milliseconds').default(0),
  AGENT_CONNECTIONS_PER_ADDRESS: wholeNumber('AGENT_CONNECTIONS_PER_ADDRESS', 1, 65_536, 'connections').default(64),
  AGENT_PULL_TIMEOUT_S: wholeNumber('AGENT_PULL_TIMEOUT_S', 1, 3_600, 'seconds').default(300),
  AGENT_REGISTRY_AUTH: string(),
  AGENT_IMAGE_PULL_SECRETS: string().matches(
    /^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?(\s*,\s*[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?)*$/,
    'AGENT_IMAGE_PULL_SECRETS must be Secret names separated by commas, e.g. team-registry',
  ),
  AGENT_REGISTRIES: string().matches(
    /^[a-z0-9.-]+(:\d+)?(\s*,\s*[a-z0-9.-]+(:\d+)?)*$/i,
    'AGENT_REGISTRIES must be registry hosts separated by commas, e.g. registry.example.com,127.0.0.1:5000,docker.io',
  ),
  AGENT_NOTIFY_DISCORD_URL: httpUrl('AGENT_NOTIFY_DISCORD_URL'),
  AGENT_NOTIFY_SLACK_URL: httpUrl('AGENT_NOTIFY_SLACK_URL'),
  AGENT_NOTIFY_TELEGRAM_TOKEN: string().matches(/^\d+:[\w-]+$/, 'AGENT_NOTIFY_TELEGRAM_TOKEN must be a Telegram bot token, e.g. 123456:ABC-def'),
  AGENT_NOTIFY_TELEGRAM_CHAT_ID: string()
    .matches(/^(-?\d+|@\w{4,})$/, 'AGENT_NOTIFY_TELEGRAM_CHAT_ID must be a chat id (e.g. -1001234567890) or @channelname')
    .when('AGENT_NOTIFY_TELEGRAM_TOKEN', {
      is: (token: string | undefined) => token !== undefined,
      then: (chat) => chat.required('AGENT_NOTIFY_TELEGRAM_CHAT_ID is required when AGENT_NOTIFY_TELEGRAM_TOKEN is set: the chat to tell'),
    }),
  AGENT_NOTIFY_TELEGRAM_API: httpUrl('AGENT_NOTIFY_TELEGRAM_API').default('https://api.telegram.org'),
  AGENT_NOTIFY_NTFY_URL: httpUrl('AGENT_NOTIFY_NTFY_URL').test(
    'topic',
    'AGENT_NOTIFY_NTFY_URL must name a topic, e.g. https://ntfy.sh/my-bots',
    (url) => url === undefined || /^\/[\w-]{1,64}\/?$/.test(URL.parse(url)?.pathname ?? ''),
  ),
  AGENT_NOTIFY_NTFY_TOKEN: string().matches(/^\S+$/, 'AGENT_NOTIFY_NTFY_TOKEN must not contain white space'),
  AGENT_NOTIFY_EVENTS: string().matches(/^[a-z-]+(\s*,\s*[a-z-]+)*$/, 'AGENT_NOTIFY_EVENTS must be event types separated by commas, e.g. crash-looping,deploy-failed'),
  AGENT_NOTIFY_BOT_HOSTS: string().matches(
    /^[a-z0-9.-]+(:\d+)?(\s*,\s*[a-z0-9.-]+(:\d+)?)*$/i,
    'AGENT_NOTIFY_BOT_HOSTS must be hosts separated by commas, e.g. discord.com,hooks.slack.com,ntfy.example.com:8443',
  ),
  AGENT_CONSOLE_URL: httpUrl('AGENT_CONSOLE_URL'),
  AGENT_BOTS_AGENT_URL: string()
    .matches(/^https?:\/\/[^\s/]+(\/\S*)?$/, 'AGENT_BOTS_AGENT_URL must be an http:// or https:// URL')
    .default('http://agent:8000'),
});

/**
 * Whether the host itself (127.0.0.1, ::1) is the platform (docs/api.md §4, rule 6): by default only
 * where addresses name bots. Where tokens do, loopback is a proxy's hop (a sidecar hands every bot's
 * connections over from it), and one address cannot be both: that combination, or a hop named on
 * 127.0.0.1 or ::1, is refused rather than making every bot behind the hop the platform.
 */
function loopbackPlatformOf(given: 'on' | 'off' | undefined, identity: Identity, proxyAddresses: readonly string[]): boolean {
  if (given === undefined) return identity === 'address' && !proxyAddresses.some(isHostItself);
  if (given === 'off') return false;
  if (identity !== 'address') {
    throw new ConfigError(
      `AGENT_LOOPBACK_PLATFORM=on cannot go with AGENT_IDENTITY=${identity}: there loopback is a proxy's hop that every bot may call through; unset AGENT_LOOPBACK_PLATFORM and give the platform AGENT_ADMIN_TOKEN`,
    );
  }
  const hop = proxyAddresses.find(isHostItself);
  if (hop !== undefined) {
    throw new ConfigError(`AGENT_LOOPBACK_PLATFORM=on cannot go with ${hop} in AGENT_PROXY_ADDRESSES: every bot behind that hop would be the platform; unset AGENT_LOOPBACK_PLATFORM and give the platform AGENT_ADMIN_TOKEN`);
  }
  return true;
}

/**
 * Reads and validates the configuration. An empty variable counts as unset.
 * Throws ConfigError naming the first bad variable.
 */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const given = Object.fromEntries(
    Object.keys(env.fields)
      .map((name) => [name, source[name]?.trim()])
      .filter(([, value]) => value !== undefined && value !== ''),
  );
  try {
    const values = env.validateSync(given, { abortEarly: true, stripUnknown: true });
    const proxyAddresses = Object.freeze(
      (values.AGENT_PROXY_ADDRESSES ?? '')
        .split(',')
        .map((address) => address.trim().toLowerCase())
        .filter((address) => address !== ''),
    );
    if (values.AGENT_LOG_DATABASE_URL !== undefined && values.AGENT_LOG_HISTORY === 'off') {
      throw new ConfigError('AGENT_LOG_DATABASE_URL needs AGENT_LOG_HISTORY=on: the lines shipped there are those the history keeps');
    }
    return Object.freeze({
      runtime: values.AGENT_RUNTIME,
      host: values.AGENT_HOST,
      port: values.AGENT_PORT,
      dockerHost: values.DOCKER_HOST,
      namespace: values.AGENT_NAMESPACE,
      restartTimeoutMs: values.AGENT_RESTART_TIMEOUT_MS,
      adminToken: values.AGENT_ADMIN_TOKEN,
      rateLimit: values.AGENT_RATE_LIMIT,
      rateWindowMs: values.AGENT_RATE_WINDOW_MS,
      readRate: values.AGENT_READ_RATE,
      botsNetwork: values.AGENT_BOTS_NETWORK,
      botsAgentUrl: values.AGENT_BOTS_AGENT_URL,
      dataDir: values.AGENT_DATA_DIR,
      backupDir: values.AGENT_BACKUP_DIR,
      backupStoresFile: values.AGENT_BACKUP_STORES,
      databaseUrl: values.AGENT_DATABASE_URL,
      webhook:
        values.AGENT_WEBHOOK_URL && values.AGENT_WEBHOOK_SECRET
          ? { url: values.AGENT_WEBHOOK_URL, secret: values.AGENT_WEBHOOK_SECRET }
          : undefined,
      trustedHosts: Object.freeze(
        (values.AGENT_TRUSTED_HOSTS ?? '')
          .split(',')
          .map((host) => host.trim().toLowerCase())
          .filter((host) => host !== ''),
      ),
      provisioning: values.AGENT_PROVISIONING === 'on',
      loopbackPlatform: loopbackPlatformOf(values.AGENT_LOOPBACK_PLATFORM, values.AGENT_IDENTITY, proxyAddresses),
      connectionsPerAddress: values.AGENT_CONNECTIONS_PER_ADDRESS,
      readyGraceMs: values.AGENT_READY_GRACE_MS,
      shutdownDelayMs: values.AGENT_SHUTDOWN_DELAY_MS,
      watchdog: values.AGENT_WATCHDOG === 'on',
      logHistory:
        values.AGENT_LOG_HISTORY === 'on'
          ? Object.freeze({
              ratePerSecond: values.AGENT_LOG_HISTORY_RATE,
              retention: Object.freeze({ days: values.AGENT_LOG_HISTORY_DAYS, botBytes: values.AGENT_LOG_HISTORY_BOT_MB * 1_000_000, totalBytes: values.AGENT_LOG_HISTORY_MB * 1_000_000 }),
              ...(values.AGENT_LOG_DATABASE_URL === undefined ? {} : { databaseUrl: values.AGENT_LOG_DATABASE_URL }),
            })
          : undefined,
      logLevel: values.AGENT_LOG_LEVEL,
      // On Kubernetes the cluster is one node, whichever pod answers.
      node: values.AGENT_NODE ?? (values.AGENT_RUNTIME === 'kubernetes' ? KUBERNETES_NODE : defaultNode()),
      nodeUrl: values.AGENT_NODE_URL,
      fleetKey: values.AGENT_FLEET_KEY,
      pullTimeoutMs: values.AGENT_PULL_TIMEOUT_S * 1000,
      registryAuthFile: values.AGENT_REGISTRY_AUTH,
      chats: chatsOf(values),
      botChatBase: Object.freeze({
        telegramApi: values.AGENT_NOTIFY_TELEGRAM_API,
        events: Object.freeze(eventsOf(values.AGENT_NOTIFY_EVENTS) ?? [...CHAT_EVENTS]),
        consoleUrl: values.AGENT_CONSOLE_URL,
        hosts: Object.freeze(
          values.AGENT_NOTIFY_BOT_HOSTS === undefined
            ? [...BOT_CHAT_HOSTS]
            : values.AGENT_NOTIFY_BOT_HOSTS.split(',').map((host) => host.trim().toLowerCase()).filter((host) => host !== '' && host !== 'none'),
        ),
      }),
      imagePullSecrets: Object.freeze((values.AGENT_IMAGE_PULL_SECRETS ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '')),
      registries:
        values.AGENT_REGISTRIES === undefined
          ? undefined
          : Object.freeze(values.AGENT_REGISTRIES.split(',').map((host) => host.trim().toLowerCase()).filter((host) => host !== '')),
      identity: values.AGENT_IDENTITY,
      proxyAddresses,
    });
  } catch (err) {
    if (err instanceof ValidationError) throw new ConfigError(err.errors[0] ?? err.message);
    throw err;
  }
}

/** The chats of AGENT_NOTIFY_* (docs/api.md §16); undefined when none is set. */
function chatsOf(values: {
  AGENT_NOTIFY_DISCORD_URL?: string | undefined;
  AGENT_NOTIFY_SLACK_URL?: string | undefined;
  AGENT_NOTIFY_TELEGRAM_TOKEN?: string | undefined;
  AGENT_NOTIFY_TELEGRAM_CHAT_ID?: string | undefined;
  AGENT_NOTIFY_TELEGRAM_API: string;
  AGENT_NOTIFY_NTFY_URL?: string | undefined;
  AGENT_NOTIFY_NTFY_TOKEN?: string | undefined;
  AGENT_NOTIFY_EVENTS?: string | undefined;
  AGENT_CONSOLE_URL?: string | undefined;
}): ChatConfig | undefined {
  const telegram =
    values.AGENT_NOTIFY_TELEGRAM_TOKEN && values.AGENT_NOTIFY_TELEGRAM_CHAT_ID
      ? { api: values.AGENT_NOTIFY_TELEGRAM_API, token: values.AGENT_NOTIFY_TELEGRAM_TOKEN, chatId: values.AGENT_NOTIFY_TELEGRAM_CHAT_ID }
      : undefined;
  const ntfy = values.AGENT_NOTIFY_NTFY_URL ? { url: values.AGENT_NOTIFY_NTFY_URL, token: values.AGENT_NOTIFY_NTFY_TOKEN } : undefined;
  if (!values.AGENT_NOTIFY_DISCORD_URL && !values.AGENT_NOTIFY_SLACK_URL && !telegram && !ntfy) return undefined;
  const events = eventsOf(values.AGENT_NOTIFY_EVENTS);
  return Object.freeze({
    discordUrl: values.AGENT_NOTIFY_DISCORD_URL,
    slackUrl: values.AGENT_NOTIFY_SLACK_URL,
    telegram,
    ntfy,
    events: Object.freeze(events ?? [...CHAT_EVENTS]),
    consoleUrl: values.AGENT_CONSOLE_URL,
  });
}

/** The event types of AGENT_NOTIFY_EVENTS; undefined when it is not set. */
function eventsOf(list: string | undefined): string[] | undefined {
  return list?.split(',').map((type) => type.trim()).filter((type) => type !== '');
}
