import type { BotDataFolder } from '../data/bot-data.js';
import type { RegistryLogin } from './registry-credentials.js';

/** Processes and threads a created bot may run at once: a fork bomb stays inside its bot. */
export const BOT_PIDS_LIMIT = 512;
/**
 * The capabilities a bot created on Docker keeps (all others dropped): enough for an entrypoint that
 * starts as root, fixes file owners and drops to its own user. Not NET_RAW, with which a bot could
 * forge another bot's address on a shared bridge, and so its identity.
 */
export const BOT_CAPABILITIES = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID', 'NET_BIND_SERVICE', 'KILL'] as const;
/** The user a bot created on Kubernetes runs as: the restricted Pod Security profile runs nothing as root. */
export const BOT_KUBE_USER = 10_001;

/** PORT of a bot created without one. */
export const DEFAULT_BOT_PORT = 8080;

/** What the platform asks for when it creates a bot. */
export interface BotSpec {
  readonly id: string;
  readonly ownerId: string;
  readonly image: string;
  readonly template: string;
  /** The bot's secret token; never logged, never answered back. */
  readonly token: string;
  readonly domain: string | undefined;
  readonly port: number | undefined;
  /** Extra environment variables; they cannot replace the platform's own. */
  readonly env: Readonly<Record<string, string>>;
  readonly memoryLimitBytes: number | undefined;
  /** CPU limit in cores, e.g. 0.5. */
  readonly cpuLimit: number | undefined;
  /** The command to run instead of the image's own. */
  readonly command: readonly string[] | undefined;
  /** Run under an init that passes signals on (Docker's `--init`; on Kubernetes the pod's shared process namespace). */
  readonly init?: boolean | undefined;
  /** Its health check and the watchdog's grace (docs/api.md §13); undefined: the image's own check, if any. */
  readonly health?: BotHealthSpec | undefined;
  /** When the agent gives up on the bot, and the watchdog's back-off (docs/api.md §13); undefined: never, and the defaults. */
  readonly restartPolicy?: RestartPolicySpec | undefined;
  /** The login for the image's registry, where it wants one and AGENT_REGISTRY_AUTH has none (docs/api.md §14); never logged. */
  readonly registryLogin?: RegistryLogin | undefined;
  /** The revision it runs: 1 for a new bot, a moved bot's own on its new node (docs/api.md §17). */
  readonly revision?: number | undefined;
  /** Its folders whose files outlive its container (docs/api.md §19); none: it keeps nothing. */
  readonly data?: readonly BotDataFolder[] | undefined;
}

/** A create's `health` block (docs/api.md §13). */
export interface BotHealthSpec {
  /** A command run inside the bot, without a shell: exit 0 is healthy. */
  readonly exec: readonly string[] | undefined;
  readonly intervalS: number;
  readonly timeoutS: number;
  readonly retries: number;
  readonly startPeriodS: number;
  /** Seconds after its last heartbeat a bot turns unhealthy; undefined: no heartbeats are expected. */
  readonly heartbeatTtlS: number | undefined;
  readonly graceS: number | undefined;
}

/** A create's `restart_policy` (docs/api.md §13), in seconds; undefined fields: the defaults. */
export interface RestartPolicySpec {
  readonly maxCrashes?: number | undefined;
  readonly windowS?: number | undefined;
  readonly backoffS?: number | undefined;
  readonly backoffMaxS?: number | undefined;
}

/** A bot as the platform's listing shows it. */
export interface BotSummary {
  readonly bot_id: string;
  readonly user_id: string | undefined;
  readonly template: string | undefined;
  readonly state: 'running' | 'stopped';
  /** ISO time of the current run's start; undefined for a bot that never ran. */
  readonly started_at: string | undefined;
  /** The image it runs, as it was asked for, and its revision (docs/api.md §15). */
  readonly image: string | undefined;
  readonly revision: number;
}

/** The names under which every bot receives its token (docs/api.md §6). */
export const TOKEN_VARIABLES = [
  'BOT_TOKEN',
  'DISCORD_TOKEN',
  'DISCORD_BOT_TOKEN',
  'TELEGRAM_BOT_TOKEN',
  'TOKEN',
  'API_TOKEN',
] as const;

/** Variables the platform sets, which a spec's extra `env` cannot replace. */
export const PLATFORM_VARIABLES = new Set<string>([
  ...TOKEN_VARIABLES,
  'BOT_ID',
  'USER_ID',
  'DOMAIN',
  'TEMPLATE',
  'PORT',
  'PLATFORM_AGENT_URL',
  'PLATFORM_AGENT_TOKEN',
  'PLATFORM_AGENT_TOKEN_FILE',
]);

/** Label naming the bot's template, for listings. */
export const TEMPLATE_LABEL = 'bot-agent/template';

/**
 * Every variable of docs/api.md §6 but the token ones, then the extras:
 * `DOMAIN` only when one is assigned.
 */
export function botEnvironment(spec: BotSpec, agentUrl: string): Record<string, string> {
  return {
    ...spec.env,
    BOT_ID: spec.id,
    USER_ID: spec.ownerId,
    TEMPLATE: spec.template,
    PORT: String(spec.port ?? DEFAULT_BOT_PORT),
    PLATFORM_AGENT_URL: agentUrl,
    ...(spec.domain === undefined ? {} : { DOMAIN: spec.domain }),
  };
}
