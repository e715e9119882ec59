import { LRUCache } from 'lru-cache';
import { array, boolean, mixed, number, object, ObjectSchema, string, ValidationError } from 'yup';
import { DEFAULT_BOT_PORT, PLATFORM_VARIABLES } from '../provisioning/bot-spec.js';
import type { InferType, Schema } from 'yup';
import { DEFAULT_DEADLINE_S, DEFAULT_MIN_READY_S } from '../deploys/deploys.js';
import { BadRequest, Unprocessable } from '../errors.js';
import { DEFAULT_HEARTBEAT_TTL_S, HEARTBEAT_TTL_MAX_S, HEARTBEAT_TTL_MIN_S } from '../health/heartbeats.js';
import { DEFAULT_GRACE_S, GRACE_MAX_S, GRACE_MIN_S } from '../health/watchdog.js';
import { PATTERN_MAX } from '../log-history/line-match.js';
import { wholeNumber } from '../whole-number.js';
import { BACKUP_ID, STORE_NAME } from '../backups/backup-folder.js';
import { PRE_TIMEOUT_MAX_S } from '../backups/backups.js';
import { dataPathProblem, MAX_DATA_FOLDERS, MAX_DATA_SIZE_MB, overlappingFolders } from '../data/bot-data.js';
import { NODE_NAME } from '../config.js';
import { BOT_ID_MAX_LENGTH, BOT_ID_PATTERN } from '../runtime/labels.js';
import { RESTART_POLICY } from '../runtime/health-policy.js';

const botIdShape = `must look like bot_<digits>_<digits>_<letters or digits>, at most ${BOT_ID_MAX_LENGTH} characters`;

/** A bot id, named `field` in error messages. */
export function botIdSchema(field: string) {
  return string()
    .strict()
    .typeError(`${field} must be a string`)
    .required(`${field} is required`)
    .max(BOT_ID_MAX_LENGTH, `${field} ${botIdShape}`)
    .matches(BOT_ID_PATTERN, `${field} ${botIdShape}`);
}

const userId = string()
  .strict()
  .typeError('user_id must be a string')
  .required('user_id is required')
  .max(256, 'user_id must be at most 256 characters');

const jsonObject = 'request body must be a JSON object';

/** Body of restart, stop and start. */
export const ownerRequest = object({ bot_id: botIdSchema('bot_id'), user_id: userId }).typeError(jsonObject);

/** How many log lines a logs call returns when it names none. */
export const DEFAULT_LOG_LINES = 100;
/** The most log lines one call may ask for. */
export const MAX_LOG_LINES = 10_000;

/** An ISO 8601 time with its zone (docs/api.md §2), as a logs read's `since` and `until` take it. */
const ISO_TIME = /^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

/** Whether the date a time begins with is a day of the calendar (no 31 June, 29 February only in a leap year). */
function isCalendarDay(time: string): boolean {
  const [year, month, day] = time.slice(0, 10).split('-').map(Number) as [number, number, number];
  // setUTCFullYear, not Date.UTC: the latter reads years 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** A logs read's `since` or `until`. */
const logTime = (field: string) =>
  string()
    .strict()
    .typeError(`${field} must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z`)
    .matches(ISO_TIME, `${field} must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z`)
    .test(field, `${field} must be a time in ISO 8601 with its zone, e.g. 2026-12-06T10:00:00Z`, (value) => value === undefined || !ISO_TIME.test(value) || isCalendarDay(value))
    .meta({ jsonSchema: { format: 'date-time' } });

/**
 * A logs read's window, where it names one: after `since`, up to `until` (docs/api.md §2). Well-formed times that
 * make no window (since not before until), or a window with follow=true, are 422: no schema states either.
 */
export function logWindowOf(value: { since?: string | undefined; until?: string | undefined; follow?: string | undefined }): { since?: Date; until?: Date } {
  const window = { ...(value.since === undefined ? {} : { since: new Date(value.since) }), ...(value.until === undefined ? {} : { until: new Date(value.until) }) };
  if (window.since !== undefined && window.until !== undefined && window.since.getTime() >= window.until.getTime()) throw new Unprocessable('since must be before until');
  if (value.follow === 'true' && (window.since !== undefined || window.until !== undefined)) throw new Unprocessable('since and until are not taken with follow=true');
  return window;
}

/** Body of logs; `lines` defaults to DEFAULT_LOG_LINES. */
export const logsRequest = object({
  bot_id: botIdSchema('bot_id'),
  lines: wholeNumber('lines', 1, MAX_LOG_LINES).strict().meta({ jsonSchema: { default: DEFAULT_LOG_LINES } }),
  since: logTime('since'),
  until: logTime('until'),
}).typeError(jsonObject);

/** A query value of digits only, as a number; anything else fails as not a number. */
export const digits = (_value: unknown, original: unknown) => (typeof original === 'string' && /^\d{1,9}$/.test(original) ? Number(original) : NaN);

/** Query of GET logs: `lines` from 0 (none) to MAX_LOG_LINES, `follow` true or false, a window of `since` and `until`. */
export const logsQuery = object({
  lines: wholeNumber('lines', 0, MAX_LOG_LINES).transform(digits).meta({ jsonSchema: { default: DEFAULT_LOG_LINES } }),
  follow: string().strict().typeError('follow must be true or false').oneOf(['true', 'false'], 'follow must be true or false'),
  since: logTime('since'),
  until: logTime('until'),
});

/** How many lines a search of the log history answers when it names no limit, and at most (docs/api.md §21). */
export const DEFAULT_HISTORY_LINES = 100;
export const MAX_HISTORY_LINES = 1_000;
/** The longest substring a search may give. */
export const HISTORY_Q_MAX = 1_024;

/** Query of GET logs/history (docs/api.md §21). */
export const logHistoryQuery = object({
  since: logTime('since'),
  until: logTime('until'),
  run: logTime('run'),
  q: string().strict().max(HISTORY_Q_MAX, `q must be at most ${HISTORY_Q_MAX} characters`).min(1, 'q must not be empty'),
  regex: string().strict().max(PATTERN_MAX, `regex must be at most ${PATTERN_MAX} characters`).min(1, 'regex must not be empty'),
  stream: string().strict().oneOf(['stdout', 'stderr', 'agent'] as const, 'stream must be stdout, stderr or agent'),
  order: string().strict().oneOf(['newest', 'oldest'] as const, 'order must be newest or oldest').meta({ jsonSchema: { default: 'newest' } }),
  limit: wholeNumber('limit', 1, MAX_HISTORY_LINES).transform(digits).meta({ jsonSchema: { default: DEFAULT_HISTORY_LINES } }),
  // A node's own place (at-seq), or the places of several nodes a search over them answered (n.…: src/log-history/nodes-search.ts).
  cursor: string().strict().matches(/^(\d{1,16}-\d{1,16}|n\.[\w-]{1,16384})$/, 'cursor must be a `next` a search answered, e.g. 1733479200000-42'),
});

/** Query of GET /api/logs/history, every bot's (docs/api.md §21): a bot's search's, without run and cursor, with owner and node. */
export const fleetLogHistoryQuery = logHistoryQuery.omit(['run', 'cursor']).shape({
  user_id: string().strict().min(1, 'user_id must not be empty').max(256, 'user_id must be at most 256 characters'),
  node: string().strict().matches(NODE_NAME, 'node must be a node name: lower-case letters, digits, dots and dashes'),
});

/** The body of POST /api/admin/alerts (docs/api.md §22); which fields a kind takes is checked by alertSpecOf. */
export const alertRequest = object({
  name: string().strict().typeError('name must be text').required('name is required').min(1, 'name must not be empty').max(100, 'name must be at most 100 characters'),
  bot_id: botIdSchema('bot_id').optional(),
  kind: string().strict().required('kind is required').oneOf(['line', 'cpu', 'memory', 'silence'] as const, 'kind must be line, cpu, memory or silence'),
  q: string().strict().typeError('q must be text').min(1, 'q must not be empty').max(HISTORY_Q_MAX, `q must be at most ${HISTORY_Q_MAX} characters`),
  regex: string().strict().typeError('regex must be text').min(1, 'regex must not be empty').max(PATTERN_MAX, `regex must be at most ${PATTERN_MAX} characters`),
  stream: string().strict().oneOf(['stdout', 'stderr'] as const, 'stream must be stdout or stderr'),
  above_percent: number()
    .strict()
    .typeError('above_percent must be a number of percent from 1 to 10000')
    .min(1, 'above_percent must be a number of percent from 1 to 10000')
    .max(10_000, 'above_percent must be a number of percent from 1 to 10000'),
  window_s: wholeNumber('window_s', 0, 86_400, 'seconds').strict(),
  silent_s: wholeNumber('silent_s', 10, 604_800, 'seconds').strict(),
  cooldown_s: wholeNumber('cooldown_s', 0, 604_800, 'seconds').strict().meta({ jsonSchema: { default: 300 } }),
})
  .typeError(jsonObject)
  .required(jsonObject);

/** How many exit records GET exits answers when it names no limit, and at most. */
export const DEFAULT_EXITS = 20;
export const MAX_EXITS = 50;

/** Query of GET exits: `limit` from 1 to MAX_EXITS. */
export const exitsQuery = object({
  limit: wholeNumber('limit', 1, MAX_EXITS).transform(digits).meta({ jsonSchema: { default: DEFAULT_EXITS } }),
});

/** Query of the event streams: `after`, the cursor to resume from (as Last-Event-ID). */
export const eventsQuery = object({
  after: string().strict().typeError('after must be an event id').matches(/^[0-9]{1,15}$/, 'after must be an event id the agent sent'),
});

// The grammar of an image reference, as the engine parses it (distribution/reference): a registry
// host only when the first part has a dot or a port or is localhost, lower-case path parts, a tag, a digest.
const pathPart = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const hostPart = '[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
const registry = `(?:(?:${hostPart}(?:\\.${hostPart})+|localhost)(?::[0-9]{1,5})?|${hostPart}:[0-9]{1,5})`;
export const IMAGE_REFERENCE = new RegExp(
  `^(?:${registry}/)?${pathPart}(?:/${pathPart})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`,
);

const envName = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** No process can take a NUL in its environment or arguments (the engine answers 500 for one). */
const NO_NUL = /^[^\u0000]*$/;

/** The image the document's example names (a platform's own registry). */
export const EXAMPLE_IMAGE = 'registry.example.com/bots/telegram:1';

/** Seconds a heartbeat holds (docs/api.md §13). */
const heartbeatTtl = wholeNumber('ttl_s', HEARTBEAT_TTL_MIN_S, HEARTBEAT_TTL_MAX_S).strict();

/** Body of POST /api/bots/self/heartbeat: optional, as is its one field. */
export const heartbeatRequest = object({ ttl_s: heartbeatTtl.meta({ jsonSchema: { default: DEFAULT_HEARTBEAT_TTL_S } }) }).typeError(jsonObject);

/** A create's `health` block (docs/api.md §13): an exec check, heartbeats, or both, and the watchdog's grace. */
export const healthSpec = object({
  exec: array(string().strict().typeError('health.exec must be a list of strings').required().matches(NO_NUL, 'health.exec must not contain a NUL character'))
    .strict()
    .typeError('health.exec must be a list of strings')
    .min(1, 'health.exec must not be empty')
    .max(64, 'health.exec is too long')
    .meta({ jsonSchema: { description: 'a command run inside the bot, without a shell; exit 0 is healthy', examples: [['sh', '-c', 'test -f /tmp/connected']] } }),
  interval_s: wholeNumber('health.interval_s', 1, 3_600).strict().meta({ jsonSchema: { default: 10 } }),
  timeout_s: wholeNumber('health.timeout_s', 1, 600).strict().meta({ jsonSchema: { default: 5 } }),
  retries: wholeNumber('health.retries', 1, 100).strict().meta({ jsonSchema: { default: 3 } }),
  start_period_s: wholeNumber('health.start_period_s', 0, 3_600).strict().meta({ jsonSchema: { default: 0 } }),
  heartbeat: object({ ttl_s: wholeNumber('health.heartbeat.ttl_s', HEARTBEAT_TTL_MIN_S, HEARTBEAT_TTL_MAX_S).strict().required('health.heartbeat.ttl_s is required') })
    .typeError('health.heartbeat must be an object')
    .default(undefined),
  grace_s: wholeNumber('health.grace_s', GRACE_MIN_S, GRACE_MAX_S).strict().meta({ jsonSchema: { default: DEFAULT_GRACE_S } }),
})
  .typeError('health must be an object')
  .default(undefined)
  .meta({ jsonSchema: { anyOf: [{ required: ['exec'] }, { required: ['heartbeat'] }] } })
  .test('health', 'health needs exec, heartbeat or both', (value) => value === undefined || value.exec !== undefined || value.heartbeat !== undefined);

/** A create's `restart_policy` (docs/api.md §13): when the agent gives up on a crashing bot, and the watchdog's back-off. */
export const restartPolicySpec = object({
  max_crashes: wholeNumber('restart_policy.max_crashes', RESTART_POLICY.maxCrashes.min, RESTART_POLICY.maxCrashes.max)
    .strict()
    .meta({ jsonSchema: { description: 'crashes within window_s past which the bot is stopped and given up on; absent: never' } }),
  window_s: wholeNumber('restart_policy.window_s', RESTART_POLICY.windowS.min, RESTART_POLICY.windowS.max).strict().meta({ jsonSchema: { default: RESTART_POLICY.windowS.default } }),
  backoff_s: wholeNumber('restart_policy.backoff_s', RESTART_POLICY.backoffS.min, RESTART_POLICY.backoffS.max).strict().meta({ jsonSchema: { default: RESTART_POLICY.backoffS.default } }),
  backoff_max_s: wholeNumber('restart_policy.backoff_max_s', RESTART_POLICY.backoffMaxS.min, RESTART_POLICY.backoffMaxS.max)
    .strict()
    .meta({ jsonSchema: { default: RESTART_POLICY.backoffMaxS.default } }),
})
  .typeError('restart_policy must be an object')
  .default(undefined);

const MEMORY_LIMIT = 'memory_limit must be a whole number of bytes from 6 MiB to 1 PiB';

const imageField = string()
  .strict()
  .typeError('image must be a string')
  .required('image is required')
  .max(255, 'image must be at most 255 characters')
  .matches(IMAGE_REFERENCE, 'image must be an image reference (lower-case name, optional :tag and @digest), e.g. registry.example.com/bot:1')
  .meta({ jsonSchema: { examples: [EXAMPLE_IMAGE] } });

const envField = mixed<Record<string, string>>()
  .meta({
    // What the test below checks, for /openapi.json (a test keeps the two in step).
    jsonSchema: {
      type: 'object',
      maxProperties: 100,
      propertyNames: { pattern: envName.source, not: { enum: [...PLATFORM_VARIABLES] } },
      additionalProperties: { type: 'string', maxLength: 4096, pattern: NO_NUL.source },
    },
  })
  .test(
    'env',
    `env must be an object of at most 100 string values without NUL, named like ABC_1, none of ${[...PLATFORM_VARIABLES].join(', ')}`,
    (value) =>
      value === undefined ||
      (typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value) &&
        Object.keys(value).length <= 100 &&
        Object.entries(value).every(
          ([name, v]) => envName.test(name) && !PLATFORM_VARIABLES.has(name) && typeof v === 'string' && v.length <= 4096 && NO_NUL.test(v),
        )),
  );

// At most 1 PiB: a larger number is past what the engine (an int64) or JSON (2^53) holds exactly.
const memoryLimitField = number()
  .strict()
  .typeError(MEMORY_LIMIT)
  .integer(MEMORY_LIMIT)
  .min(6 * 1024 * 1024, MEMORY_LIMIT)
  .max(2 ** 50, MEMORY_LIMIT)
  .meta({ jsonSchema: { examples: [256 * 1024 * 1024] } });

const cpuLimitField = number()
  .strict()
  .typeError('cpu_limit must be a number of CPUs')
  .positive('cpu_limit must be above 0')
  .max(256, 'cpu_limit is too high')
  .meta({ jsonSchema: { examples: [0.5] } });

const commandField = array(string().strict().typeError('command must be a list of strings').required().matches(NO_NUL, 'command must not contain a NUL character'))
  .strict()
  .typeError('command must be a list of strings')
  .min(1, 'command must not be empty')
  .max(64, 'command is too long')
  .meta({ jsonSchema: { examples: [['sh', '-c', 'exec python -m bot']] } });

const registryAuthField = object({
  username: string().strict().typeError('registry_auth.username must be a string').required('registry_auth.username is required').max(1024, 'registry_auth.username is too long').matches(NO_NUL, 'registry_auth.username must not contain a NUL character'),
  password: string().strict().typeError('registry_auth.password must be a string').required('registry_auth.password is required').max(4096, 'registry_auth.password is too long').matches(NO_NUL, 'registry_auth.password must not contain a NUL character'),
})
  .default(undefined)
  .typeError('registry_auth must be an object with username and password')
  .meta({ jsonSchema: { description: "A login for the image's registry, used for this pull only; never answered back nor logged" } });

/** A yup test's name whose failures are a 422, not a 400: the value has the right shape but breaks a rule (docs/api.md §3). */
const UNPROCESSABLE = 'unprocessable';

/**
 * dataPathProblem's rules, but for folders that hold one another, as a JSON Schema pattern (without lookarounds,
 * which not every client's regex engine knows): `/` and one or more parts, none `.` or `..`, none empty, and no
 * control characters, `:` or `,`.
 */
const PART = '[^\\u0000-\\u001f\\u007f/:,]';
const NO_DOT = '[^.\\u0000-\\u001f\\u007f/:,]';
const DATA_PATH_PATTERN = `^(/(${NO_DOT}${PART}*|\\.${NO_DOT}${PART}*|\\.\\.${PART}+))+$`;

/** A create's `data`: the bot's folders whose files outlive its container (docs/api.md §19); a broken rule is a 422 naming the field. */
const dataField = array(
  object({
    path: string()
      .strict()
      .typeError('data[].path must be a string')
      .required('data[].path is required')
      .test(UNPROCESSABLE, 'data[].path must be an absolute path', function (path) {
        const problem = dataPathProblem(path);
        return problem === undefined || this.createError({ message: `${this.path} ${problem}` });
      })
      .meta({ jsonSchema: { pattern: DATA_PATH_PATTERN, not: { pattern: '^/(proc|sys|dev)(/|$)' }, maxLength: 255, examples: ['/home/node/.n8n'] } }),
    size_mb: number()
      .strict()
      .typeError('data[].size_mb must be a whole number of MiB')
      .test(UNPROCESSABLE, 'data[].size_mb must be a whole number of MiB', function (size) {
        if (size === undefined || (Number.isInteger(size) && size >= 1 && size <= MAX_DATA_SIZE_MB)) return true;
        return this.createError({ message: `${this.path} must be a whole number of MiB from 1 to ${MAX_DATA_SIZE_MB}` });
      })
      .meta({ jsonSchema: { minimum: 1, maximum: MAX_DATA_SIZE_MB, type: 'integer', description: 'what the bot may use, in MiB: past it an event says so (docs/api.md §19)' } }),
  })
    .noUnknown(true, 'data[] takes path and size_mb only')
    .typeError('data[] must be an object with a path')
    .meta({ jsonSchema: { additionalProperties: false } }),
)
  .strict()
  .typeError('data must be a list of folders, e.g. [{"path": "/data"}]')
  .test(UNPROCESSABLE, `data must name at most ${MAX_DATA_FOLDERS} folders`, (folders) => folders === undefined || folders.length <= MAX_DATA_FOLDERS)
  .test(UNPROCESSABLE, 'data folders must not repeat or hold one another', function (folders) {
    const paths = (folders ?? []).map((folder) => folder?.path).filter((path): path is string => typeof path === 'string');
    const overlap = overlappingFolders(paths);
    return overlap === undefined || this.createError({ message: `data folders must not repeat or hold one another: ${overlap}` });
  })
  .meta({ jsonSchema: { maxItems: MAX_DATA_FOLDERS, description: "the bot's folders whose files outlive its container: kept across restarts, deploys and rollbacks, removed with the bot unless keep_data; no two may repeat or hold one another (docs/api.md §19)" } });

/** Body of the platform's create: docs/api.md §6's inputs, limits and extras. */
export const createBotRequest = object({
  bot_id: botIdSchema('bot_id'),
  user_id: userId,
  image: imageField,
  template: string()
    .strict()
    .typeError('template must be a string')
    .required('template is required')
    .matches(/^[a-z0-9][a-z0-9_-]{0,31}$/, 'template must be lower-case letters, digits, - or _, e.g. telegram')
    .meta({ jsonSchema: { examples: ['telegram'] } }),
  token: string()
    .strict()
    .typeError('token must be a string')
    .required('token is required')
    .max(4096, 'token is too long')
    .matches(NO_NUL, 'token must not contain a NUL character')
    .meta({ jsonSchema: { description: 'Set as BOT_TOKEN and every alias; never answered back nor logged', examples: ['123456:telegram-bot-token'] } }),
  domain: string()
    .strict()
    .typeError('domain must be a string')
    .matches(/^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/, 'domain must be a host name'),
  port: wholeNumber('port', 1, 65535).strict().meta({ jsonSchema: { default: DEFAULT_BOT_PORT } }),
  env: envField,
  memory_limit: memoryLimitField,
  cpu_limit: cpuLimitField,
  command: commandField,
  health: healthSpec,
  restart_policy: restartPolicySpec,
  registry_auth: registryAuthField,
  data: dataField,
  init: boolean()
    .strict()
    .typeError('init must be true or false')
    .meta({ jsonSchema: { description: 'run the bot under an init process that passes signals on and reaps children, so that a shell as its first process stops at SIGTERM (docs/api.md §2)' } }),
  node: string()
    .strict()
    .typeError('node must be a string')
    .matches(NODE_NAME, 'node must be a node name: lower-case letters, digits, dots and dashes, e.g. host-2')
    .meta({ jsonSchema: { description: "the fleet's node to create the bot on (docs/api.md §17); default the agent asked" } }),
}).typeError(jsonObject);

/** A create's or deploy's `health` block, as validated. */
export type HealthRequest = NonNullable<InferType<typeof healthSpec>>;

/** A create's body, as validated. */
export type CreateBotBody = InferType<typeof createBotRequest>;

/** Body of POST /api/admin/bots/{bot_id}/move: the node to move the bot to (docs/api.md §17). */
export const moveRequest = object({
  node: string()
    .strict()
    .typeError('node must be a string')
    .required('node is required')
    .matches(NODE_NAME, 'node must be a node name: lower-case letters, digits, dots and dashes, e.g. host-2')
    .meta({ jsonSchema: { description: "the fleet's node to move the bot to", examples: ['host-2'] } }),
}).typeError(jsonObject);

/** Body of POST /api/admin/nodes/{node}/drain: the node its bots move to; none, they are stopped (docs/api.md §17). */
export const drainRequest = object({
  to: string()
    .strict()
    .typeError('to must be a string')
    .matches(NODE_NAME, 'to must be a node name: lower-case letters, digits, dots and dashes, e.g. host-2')
    .meta({ jsonSchema: { description: "the fleet's node the drained node's bots move to; without it they are stopped", examples: ['host-2'] } }),
}).typeError(jsonObject);

/** A node named in a path (docs/api.md §17). */
export const pathNode = string().strict().required().matches(NODE_NAME, 'node must be a node name: lower-case letters, digits, dots and dashes, e.g. host-2');

/**
 * Body of POST /api/fleet/bots: another agent of the fleet makes here a bot it moves (docs/api.md §17), as a
 * create names it, with the revision it runs.
 */
export const fleetCreateRequest = createBotRequest.omit(['node']).shape({
  revision: wholeNumber('revision', 1, 1_000_000_000).strict().required('revision is required'),
  // The image the bot runs on its old node, which its copy here must run too (docs/fleet.md).
  image_id: string().strict().typeError('image_id must be a string').matches(/^sha256:[0-9a-f]{64}$/, 'image_id must be an image id, sha256:<64 hex digits>'),
});

/** Body of POST /api/fleet/bots/{bot_id}/data: the node a moved bot comes from, and its backup there (docs/api.md §17). */
export const fleetDataRequest = object({
  from: string().strict().typeError('from must be a string').required('from is required').matches(NODE_NAME, 'from must be a node name'),
  backup_id: string().strict().typeError('backup_id must be a string').required('backup_id is required').matches(BACKUP_ID, 'backup_id must be a backup id, bak_<time>_<8 hex digits>'),
}).typeError(jsonObject);

/** Body of PATCH /api/admin/bots/{bot_id}: what a new revision changes, and how it is judged (docs/api.md §15). */
/** How long a new run must be up, and may take to get there (a deploy's, a restored bot's: docs/api.md §15, §20). */
const minReadyField = wholeNumber('min_ready_s', 0, 3_600).strict().meta({ jsonSchema: { default: DEFAULT_MIN_READY_S } });
const deadlineField = wholeNumber('deadline_s', 5, 3_600).strict().meta({ jsonSchema: { default: DEFAULT_DEADLINE_S } });

export const deployRequest = object({
  image: imageField.optional(),
  env: envField,
  command: commandField,
  memory_limit: memoryLimitField,
  cpu_limit: cpuLimitField,
  health: healthSpec,
  registry_auth: registryAuthField,
  min_ready_s: minReadyField,
  deadline_s: deadlineField,
  rollback: boolean().strict().typeError('rollback must be true or false').meta({ jsonSchema: { default: true } }),
}).typeError(jsonObject);

/** A deploy's body (PATCH /api/admin/bots/{bot_id}, or a schedule's `deploy` action). */
export type DeployBody = InferType<typeof deployRequest>;

// The URL's shape; whether it can be used (read as a URL, on an allowed host, an ntfy topic) is the 422 of
// src/notify/bot-chats.ts, as no schema can say which hosts this agent allows.
const chatUrl = (field: string) =>
  string()
    .strict()
    .typeError(`${field} must be a string`)
    .max(2048, `${field} is too long`)
    .matches(/^https?:\/\/[^\s/]+(\/\S*)?$/, `${field} must be an http:// or https:// URL`)
    .meta({ jsonSchema: { description: 'a secret: never answered back nor logged' } });

/** Body of PUT /api/admin/bots/{bot_id}/chats: the bot's own chats (docs/api.md §16); `{}` drops them. */
export const botChatsRequest = object({
  discord_url: chatUrl('discord_url').meta({ jsonSchema: { examples: ['https://discord.com/api/webhooks/123/secret'] } }),
  slack_url: chatUrl('slack_url').meta({ jsonSchema: { examples: ['https://hooks.slack.com/services/T0/B0/secret'] } }),
  telegram: object({
    token: string()
      .strict()
      .typeError('telegram.token must be a string')
      .required('telegram.token is required')
      .matches(/^\d{1,20}:[\w-]{1,100}$/, 'telegram.token must be a Telegram bot token, e.g. 123456:ABC-def'),
    chat_id: string()
      .strict()
      .typeError('telegram.chat_id must be a string')
      .required('telegram.chat_id is required')
      .matches(/^(-?\d{1,20}|@\w{4,32})$/, 'telegram.chat_id must be a chat id (e.g. -1001234567890) or @channelname'),
  })
    .default(undefined)
    .typeError('telegram must be an object with token and chat_id'),
  ntfy: object({
    url: chatUrl('ntfy.url').required('ntfy.url is required'),
    token: string().strict().typeError('ntfy.token must be a string').max(512, 'ntfy.token is too long').matches(/^\S+$/, 'ntfy.token must not contain white space'),
  })
    .default(undefined)
    .typeError('ntfy must be an object with url (and token)'),
  events: array(string().strict().typeError('events must be a list of event types').required().matches(/^[a-z][a-z-]{0,31}$/, 'events must be event types, e.g. crash-looping'))
    .strict()
    .typeError('events must be a list of event types')
    .max(32, 'events names at most 32 types')
    .default(undefined),
})
  .typeError(jsonObject);

/** The query of the platform's listing. */
/** The most bots one page of GET /api/admin/bots answers. */
export const MAX_BOTS_PAGE = 1_000;

/** Query of the bots' list: those of `user_id`; a page of `limit`, after the bot id `after` (the last one's id). */
export const listBotsQuery = object({
  user_id: userId.optional(),
  limit: wholeNumber('limit', 1, MAX_BOTS_PAGE).transform(digits),
  after: botIdSchema('after').optional(),
}).typeError('bad query');

/** Query of a bot's removal: `keep_data=true` leaves its data volumes for a create of it again (docs/api.md §19). */
export const removeBotQuery = object({
  keep_data: string().strict().typeError('keep_data must be true or false').oneOf(['true', 'false'], 'keep_data must be true or false'),
}).typeError('bad query');

/** A retention policy (docs/api.md §20): how many of the newest, and of the last days, weeks and months, to keep. */
export function retentionPolicy(name: string) {
  const count = (field: string, max: number) => wholeNumber(`${name}.${field}`, 0, max).strict();
  return object({ last: count('last', 1_000), days: count('days', 366), weeks: count('weeks', 520), months: count('months', 1_200) })
    .strict()
    .noUnknown(`${name} takes last, days, weeks and months`)
    .typeError(`${name} must be an object of last, days, weeks and months`)
    .default(undefined);
}

/** How a backup is made consistent (docs/api.md §20): in a backup's body and a schedule's backup action. */
export const backupMode = () => string().strict().typeError('mode must be stop, live or pre').oneOf(['stop', 'live', 'pre'], 'mode must be stop, live or pre');

/** An argument list run in a bot (a schedule's command, a backup's pre command): no shell unless it names one. */
export const commandArgs = (field: string, required: string) =>
  array(string().strict().typeError(`${field} must be a list of strings`).required(`${field} must not hold empty strings`).max(4096, `${field} arguments must be at most 4096 characters`))
    .strict()
    .typeError(`${field} must be a list of strings`)
    .required(required)
    .min(1, `${field} must name a program`)
    .max(64, `${field} must have at most 64 arguments`);

/** The fields of how a backup is made (docs/api.md §20), a backup's body's and a schedule's backup action's. */
export const backupHowFields = () => ({
  mode: backupMode(),
  pre: commandArgs('pre', 'pre must name a command').optional(),
  pre_timeout_s: wholeNumber('pre_timeout_s', 1, PRE_TIMEOUT_MAX_S).strict(),
});

/** Mode `pre` takes `pre` (and `pre_timeout_s`), and only it does. */
export function preMatchesMode(value: { mode?: unknown; pre?: unknown; pre_timeout_s?: unknown } | undefined, context: { createError(params: { message: string }): ValidationError }): true | ValidationError {
  if (!value) return true;
  if (value.mode === 'pre' && value.pre === undefined) return context.createError({ message: 'pre is required in mode pre: the command run in the bot before its folders are copied, e.g. ["sqlite3", "/data/bot.db", ".backup /data/bot.db.bak"]' });
  if (value.mode !== 'pre' && (value.pre !== undefined || value.pre_timeout_s !== undefined)) return context.createError({ message: 'pre and pre_timeout_s are taken only in mode pre' });
  return true;
}


/** The stores a backup is copied to (docs/api.md §20), by name. */
export const backupStores = () =>
  array(string().strict().typeError('stores must be a list of store names').required('stores must be a list of store names').matches(STORE_NAME, 'stores must be a list of store names'))
    .strict()
    .typeError('stores must be a list of store names')
    .max(16, 'stores names at most 16 stores');

/** Body of POST /api/admin/bots/{bot_id}/backups (docs/api.md §20); an empty body is a backup in stop mode. */
export const backupRequest = object({
  ...backupHowFields(),
  keep: retentionPolicy('keep'),
  stores: backupStores(),
})
  .typeError(jsonObject)
  .test('pre', preMatchesMode);

/** Body of a restore: the bot it goes into, where not the backup's own (a new bot made from another's backup). */
export const restoreRequest = object({
  into: botIdSchema('into').optional(),
  min_ready_s: minReadyField,
  deadline_s: deadlineField,
}).typeError(jsonObject);

/** Query of a backup's reads, restore and verification: the store it is in, where not the agent's folder. */
export const backupStoreQuery = object({
  store: string().strict().typeError('store must be a store name').matches(STORE_NAME, 'store must be a store name (AGENT_BACKUP_STORES)'),
}).typeError('bad query');

/** Query of a backup's archive: which of its folders. */
export const backupArchiveQuery = object({
  folder: string().strict().typeError('folder must be a data folder of the backup').required('folder is required: a data folder of the backup, e.g. /data').max(255, 'folder must be at most 255 characters'),
}).typeError('bad query');

/** Body of POST /api/session: the admin token, typed once into the console. */
export const sessionRequest = object({
  token: string().strict().typeError('token must be a string').required('token is required').max(1024, 'token must be at most 1024 characters'),
}).typeError(jsonObject);

/** The X-Bot-ID header of self restart; absent is allowed. */
export const selfRestartHeader = botIdSchema('X-Bot-ID').optional();

/** The bot id in a path. */
export const pathBotId = botIdSchema('bot id in the path');

/**
 * `validate` against `schema`, remembering up to 10,000 values that passed by `keyOf` (undefined:
 * not remembered): a bot makes the same call again and again, and yup's check was a good part of a
 * warm call's work. The key must hold all that the schema reads of a value; a failure is not kept.
 */
function remembered<S extends Schema>(schema: S, keyOf: (value: unknown) => string | undefined): (value: unknown) => S['__outputType'] {
  const passed = new LRUCache<string, NonNullable<S['__outputType']>>({ max: 10_000 });
  return (value) => {
    const key = keyOf(value);
    const known = key === undefined ? undefined : passed.get(key);
    if (known !== undefined) return known;
    const valid = validate(schema, value);
    if (key !== undefined && valid !== undefined && valid !== null) passed.set(key, valid);
    return valid;
  };
}

/** The bot id in a request's path, validated as `pathBotId`. */
export const botIdInPath: (value: unknown) => string = remembered(pathBotId, (value) => (typeof value === 'string' ? value : undefined));

/**
 * A logs call's body, validated as `logsRequest`; remembered when it names a bot id and, if any, a whole number of
 * lines, and no window (a window's times are checked each time).
 */
export const logsBody = remembered(logsRequest, (value) => {
  if (typeof value !== 'object' || value === null || Object.hasOwn(value, 'since') || Object.hasOwn(value, 'until')) return undefined;
  const { bot_id, lines } = value as { bot_id?: unknown; lines?: unknown };
  const own = Object.hasOwn(value, 'bot_id') && (lines === undefined || Object.hasOwn(value, 'lines'));
  return own && typeof bot_id === 'string' && (lines === undefined || Number.isInteger(lines)) ? `${String(lines)} ${bot_id}` : undefined;
});

/**
 * Only the fields an object schema knows, taken as own properties: yup's cast
 * looks unknown keys up on its field table, where `constructor` is found
 * (and throws), and nothing past this point should see `__proto__` tricks.
 */
function knownFields(schema: Schema, value: unknown): unknown {
  if (!(schema instanceof ObjectSchema) || typeof value !== 'object' || value === null || Array.isArray(value)) {
    return value;
  }
  const known = Object.keys(schema.fields).filter((key) => Object.hasOwn(value, key));
  return Object.fromEntries(known.map((key) => [key, (value as Record<string, unknown>)[key]]));
}

/** Validates `value` against `schema`, turning every failure into one BadRequest. */
export function validate<S extends Schema>(schema: S, value: unknown): S['__outputType'] {
  try {
    return schema.validateSync(knownFields(schema, value), { abortEarly: false });
  } catch (err) {
    if (err instanceof ValidationError) {
      const faults = err.inner.length > 0 ? err.inner : [err];
      if (faults.every((fault) => fault.type === UNPROCESSABLE)) throw new Unprocessable(err.errors.join('; '));
      throw new BadRequest(err.errors.join('; '));
    }
    throw err;
  }
}

/**
 * Validates a query against an object schema, refusing names it does not
 * know: a misspelt `limt=5` is a clear 400, not a silent default.
 */
export function validateQuery<S extends ObjectSchema<object>>(schema: S, query: Record<string, unknown>): S['__outputType'] {
  const known = Object.keys(schema.fields);
  const unknown = Object.keys(query).find((name) => !known.includes(name));
  if (unknown !== undefined) {
    const shown = unknown.length > 64 ? `${unknown.slice(0, 64)}...` : unknown;
    throw new BadRequest(`unknown query parameter ${JSON.stringify(shown)}: this path takes ${known.join(', ')}`);
  }
  return validate(schema, query);
}
