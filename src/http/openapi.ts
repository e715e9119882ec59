import { convertSchema } from '@sodaru/yup-to-json-schema';
import type { Schema, SchemaDescription } from 'yup';
import { BOT_EVENT_TYPES } from '../history/event-types.js';
import { runsQuery } from './schedule-routes.js';
import { ACTIONS_PER_SCHEDULE, COMMAND_TIMEOUT_DEFAULT_S, COMMAND_TIMEOUT_MAX_S, OFFSET_MAX_S, SCHEDULES_PER_BOT, STARTING_DEADLINE_DEFAULT_S, STARTING_DEADLINE_MAX_S } from '../schedules/schedule-spec.js';
import { HEALTH_OUTPUT_MAX } from '../runtime/health-policy.js';
import { NODE_NAME } from '../config.js';
import { STORE_NAME } from '../backups/backup-folder.js';
import { alertRequest, botChatsRequest, createBotRequest, deployRequest, eventsQuery, exitsQuery, drainRequest, fleetCreateRequest, fleetDataRequest, heartbeatRequest, listBotsQuery, fleetLogHistoryQuery, logHistoryQuery, logsQuery, logsRequest, backupArchiveQuery, backupRequest, backupStoreQuery, moveRequest, restoreRequest, ownerRequest, pathBotId, removeBotQuery, sessionRequest } from './schemas.js';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

type JsonSchema = Record<string, unknown> & { properties?: Record<string, JsonSchema> };

/**
 * The JSON Schema of a yup schema: what a request must be is written once,
 * in schemas.ts, and the document says the same (test/http/openapi.test.ts
 * checks that the two accept and refuse alike). yup's implicit `{}` default of
 * an object is left out: a body is never optional.
 */
function jsonSchemaOf(schema: Schema): JsonSchema {
  const { default: _objectDefault, ...converted } = convertSchema(schema as never) as JsonSchema;
  return markNonEmpty(schema.describe() as SchemaDescription, converted);
}

/**
 * yup's string `required()` refuses the empty string, also where the field
 * itself is optional, which the converter does not say: wherever that test
 * is, the JSON Schema gets `minLength: 1` (object fields and array items too).
 */
function markNonEmpty(description: SchemaDescription, json: JsonSchema): JsonSchema {
  if (description.type === 'string' && description.tests.some((test) => test.name === 'required')) json.minLength ??= 1;
  const { fields, innerType } = description as SchemaDescription & { fields?: Record<string, SchemaDescription>; innerType?: SchemaDescription };
  for (const [name, field] of Object.entries(fields ?? {})) {
    const property = json.properties?.[name];
    if (property) markNonEmpty(field, property);
  }
  if (innerType && json.items) markNonEmpty(innerType, json.items as JsonSchema);
  return json;
}

/** Query parameters from the fields of a yup object schema. */
function queryParameters(schema: Schema) {
  const { properties = {}, required = [] } = jsonSchemaOf(schema) as JsonSchema & { required?: string[] };
  return Object.entries(properties).map(([name, fieldSchema]) => ({ name, in: 'query', required: required.includes(name), schema: fieldSchema }));
}
const json = (schema: object) => ({ 'application/json': { schema } });

/** What each error status means, as docs/api.md §3 states it. */
const failureText: Record<number, string> = {
  400: 'Malformed input: not JSON, a missing or ill-typed field, a bad bot id or `lines`; `msg` names the field',
  403:
    'A bot naming another bot, a `user_id` that is not the owner, a caller that is neither a bot, loopback nor holds the admin token, ' +
    'or a loopback request a web page could have sent (`forbidden: cross-site request`)',
  404: '`container not found`: no such bot',
  405: 'Method not allowed on this path',
  409: '`container not found ... must be running`: the bot is stopped; or `<operation> in progress`: a stop or start waited the restart time-out behind another operation and was dropped; or `deploy in progress`: a deploy or rollback holds the bot (docs/api.md §15)',
  413: 'Body larger than 16 KiB',
  415: 'A body whose Content-Type is not JSON (`application/json` or `...+json`)',
  422: 'A well-formed request the runtime cannot carry out as asked: more CPUs than the host has, a command the image lacks',
  429: 'Too many lifecycle operations on this bot, (a bot reading itself) too many reads, or too many log followers; see Retry-After',
  500: 'The runtime refused the operation (`Failed to restart bot ...`), or the agent lacks a permission',
  501: 'The runtime in use does not offer this',
  503: "`runtime unavailable`: the container runtime cannot be reached; or (status, exit records) `database does not answer`: the history's database is away",
  504: '`timeout during restart`: the restart goes on',
  507: "The disk of the agent's backup folder is full: nothing of the backup was kept",
};

function responses(success: object, ...failures: number[]) {
  return responsesWith('200', success, ...failures);
}

function responsesWith(successStatus: string, success: object, ...failures: number[]) {
  const answers: Record<string, object> = { [successStatus]: success };
  for (const status of [...failures, 405]) {
    answers[String(status)] = { description: failureText[status], content: json(ref('Failure')) };
  }
  return answers;
}

const botIdParameter = { name: 'bot_id', in: 'path', required: true, schema: ref('BotId') };
// An empty Last-Event-ID is the same as none (what an EventSource sends before its first id).
const lastEventId = { name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string', pattern: '^[0-9]{0,15}$' } };
/** One Server-Sent Event as a client parses it (OpenAPI 3.1: `schema` describes each event); `: ping` comments every 15 s. */
const sseEvent = (events: readonly string[], description: string, withId: boolean) => ({
  'text/event-stream': {
    schema: {
      type: 'object',
      description,
      required: withId ? ['event', 'data', 'id'] : ['event', 'data'],
      properties: {
        event: { enum: events },
        data: { type: 'string', contentMediaType: 'application/json', description: 'the event as a JSON object' },
        id: { type: 'string', pattern: '^[0-9]{1,15}$', description: 'the cursor to resume after (Last-Event-ID)' },
        retry: { type: 'integer', minimum: 0 },
      },
    },
  },
});
const eventStream = sseEvent(BOT_EVENT_TYPES, 'A bot event; `id` is its cursor', true);
/** Live logs: each line (`log`, no id) and the end of each run (`exited`, with its event id). */
const logStream = sseEvent(['log', 'exited'], '`log`: {line, stream, at}; `exited`: the run ended (as in the events stream)', false);

/** A schedule's action (docs/api.md §18): one shape per type. */
const actionCommon = {
  offset_s: { type: 'integer', minimum: 0, maximum: OFFSET_MAX_S, default: 0, description: 'seconds it waits after the action before it' },
  continue_on_failure: { type: 'boolean', default: false },
};
/** Mode `pre` takes `pre` (and `pre_timeout_s`), and only it does (docs/api.md §20). */
const PRE_RULE = {
  if: { required: ['mode'], properties: { mode: { const: 'pre' } } },
  then: { required: ['pre'] },
  else: { not: { anyOf: [{ required: ['pre'] }, { required: ['pre_timeout_s'] }] } },
};
const plainAction = (type: string) => ({ type: 'object', required: ['type'], additionalProperties: false, properties: { type: { const: type }, ...actionCommon } });
const scheduleAction = {
  oneOf: [
    plainAction('restart'),
    plainAction('stop'),
    plainAction('start'),
    {
      type: 'object',
      required: ['type'],
      additionalProperties: false,
      properties: {
        type: { const: 'backup' },
        ...actionCommon,
        mode: { enum: ['stop', 'live', 'pre'], default: 'stop' },
        pre: { type: 'array', minItems: 1, maxItems: 64, items: { type: 'string', minLength: 1, maxLength: 4096 }, description: 'mode pre: the command run in the bot before its folders are copied' },
        pre_timeout_s: { type: 'integer', minimum: 1, maximum: 600, default: 60 },
        keep: ref('RetentionPolicy'),
        stores: { type: 'array', maxItems: 16, items: { type: 'string', pattern: STORE_NAME.source }, description: 'the stores it is copied to (AGENT_BACKUP_STORES)' },
      },
      ...PRE_RULE,
      description: "a backup of the bot's data folders (docs/api.md §20); refused (422) where backups are not made",
    },
    {
      type: 'object',
      required: ['type'],
      additionalProperties: false,
      properties: { type: { const: 'verify' }, ...actionCommon, store: { type: 'string', pattern: STORE_NAME.source, description: "the store whose newest backup it verifies; the agent's folder when not given" } },
      description: "a verification of the bot's newest backup (docs/api.md §20); fails when it does not read back whole",
    },
    { type: 'object', required: ['type', 'deploy'], additionalProperties: false, properties: { type: { const: 'deploy' }, ...actionCommon, deploy: ref('DeployRequest') } },
    {
      type: 'object',
      required: ['type', 'command'],
      additionalProperties: false,
      properties: {
        type: { const: 'command' },
        ...actionCommon,
        command: { type: 'array', minItems: 1, maxItems: 64, items: { type: 'string', minLength: 1, maxLength: 4096 }, description: 'the argument list, run in the bot with no shell' },
        timeout_s: { type: 'integer', minimum: 1, maximum: COMMAND_TIMEOUT_MAX_S, default: COMMAND_TIMEOUT_DEFAULT_S },
      },
    },
  ],
};
const scheduleFields = {
  name: { type: ['string', 'null'], maxLength: 100 },
  cron: { type: 'string', minLength: 1, maxLength: 200, description: 'five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly', examples: ['*/5 * * * *', '@daily'] },
  time_zone: { type: 'string', maxLength: 64, default: 'UTC', description: 'an IANA time zone', examples: ['Europe/Berlin'] },
  enabled: { type: 'boolean', default: true },
  only_when_running: { type: 'boolean', default: false },
  missed: { enum: ['skip', 'run-once'], default: 'skip' },
  starting_deadline_s: { type: 'integer', minimum: 1, maximum: STARTING_DEADLINE_MAX_S, default: STARTING_DEADLINE_DEFAULT_S },
  actions: { type: 'array', minItems: 1, maxItems: ACTIONS_PER_SCHEDULE, items: scheduleAction },
};
/** A schedule's body: a new one's (cron and actions required), or a change's (any field). */
const scheduleBody = (required: string[]) => ({ type: 'object', required, minProperties: 1, additionalProperties: false, properties: scheduleFields });
const actionOutcome = {
  type: 'object',
  required: ['type', 'outcome', 'started_at', 'ended_at', 'message'],
  properties: {
    type: { type: 'string' },
    outcome: { enum: ['running', 'succeeded', 'failed', 'not-run'] },
    started_at: { type: ['string', 'null'] },
    ended_at: { type: ['string', 'null'] },
    message: { type: ['string', 'null'] },
    exit_code: { type: ['integer', 'null'] },
    timed_out: { type: 'boolean' },
    output: { type: 'string', description: 'its standard output and error, at most 64 KiB as JSON' },
    output_truncated: { type: 'boolean' },
  },
};
const scheduleRun = {
  type: 'object',
  required: ['schedule_id', 'due_at', 'state', 'started_at', 'ended_at', 'reason', 'actions'],
  additionalProperties: false,
  properties: {
    schedule_id: { type: 'string' },
    due_at: { type: 'string', description: 'ISO 8601: the due time it was claimed for (a run now: when it was asked for)' },
    state: { enum: ['running', 'succeeded', 'failed', 'skipped', 'cut'] },
    started_at: { type: ['string', 'null'] },
    ended_at: { type: ['string', 'null'] },
    reason: { type: ['string', 'null'] },
    actions: { type: 'array', items: actionOutcome },
  },
};
const scheduleAnswer = {
  type: 'object',
  required: ['id', 'bot_id', ...Object.keys(scheduleFields), 'created_at', 'updated_at', 'next_due_at'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', pattern: '^sch_[0-9a-f]{16}$' },
    bot_id: ref('BotId'),
    ...scheduleFields,
    name: { type: ['string', 'null'] },
    actions: { type: 'array', items: { type: 'object', description: "an action as written; a deploy's variables and registry password as (set)" } },
    created_at: { type: 'string' },
    updated_at: { type: 'string' },
    next_due_at: { type: 'array', maxItems: 5, items: { type: 'string' }, description: 'the next due times (none while off), ISO 8601 in UTC' },
  },
};
const scheduleIdParameter = { name: 'schedule_id', in: 'path', required: true, schema: { type: 'string', pattern: '^sch_[0-9a-f]{16}$' } };
const scheduleFailures = [400, 403, 404, 503];
/** A rule's body, one shape per kind (docs/api.md §22): what alertSpecOf checks beyond the fields' own schemas. */
function alertRequestSchema(): JsonSchema {
  const fields = (jsonSchemaOf(alertRequest) as { properties: Record<string, JsonSchema> }).properties;
  const pick = (...names: string[]) => Object.fromEntries(names.map((name) => [name, fields[name]!]));
  const common = ['name', 'bot_id', 'cooldown_s'];
  const kind = (name: string, required: string[], own: string[], extra: Record<string, JsonSchema> = {}): JsonSchema => ({
    type: 'object',
    required: ['name', 'kind', ...required],
    additionalProperties: false,
    properties: { ...pick(...common, ...own), kind: { const: name }, ...extra },
  });
  return {
    oneOf: [
      { ...kind('line', [], ['q', 'regex', 'stream']), anyOf: [{ required: ['q'] }, { required: ['regex'] }] },
      kind('cpu', ['above_percent'], ['above_percent', 'window_s']),
      kind('memory', ['above_percent'], ['window_s'], { above_percent: { type: 'number', minimum: 1, maximum: 100 } }),
      kind('silence', ['silent_s'], ['silent_s']),
    ],
  } as JsonSchema;
}

const alertIdParameter = { name: 'alert_id', in: 'path', required: true, schema: { type: 'string', pattern: '^alr_[0-9a-f]{16}$' } };
const backupIdParameter = { name: 'backup_id', in: 'path', required: true, schema: { type: 'string', pattern: '^bak_[0-9]{8}T[0-9]{6}Z_[0-9a-f]{8}$' } };
const backupFailures = [400, 403, 404, 501];
/** A read of a store: one not configured, or one that failed. */
const storeFailures = {
  '422': { description: 'The store named is not configured (AGENT_BACKUP_STORES)', content: json(ref('Failure')) },
  '502': { description: 'The store refused, failed or did not answer', content: json(ref('Failure')) },
};
/** A schema whose `keep` (a retention policy) takes no field but its own, as yup's noUnknown says. */
function closedKeep(schema: JsonSchema): JsonSchema {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  return { ...schema, properties: { ...properties, keep: { ...properties.keep, additionalProperties: false } } };
}
/** A backup as its answers say it (docs/api.md §20). */
const backupAnswer = {
  type: 'object',
  required: ['id', 'bot_id', 'created_at', 'mode', 'downtime_ms', 'size_bytes', 'folders', 'locked', 'verification', 'copies'],
  additionalProperties: false,
  properties: {
    id: { type: 'string' },
    bot_id: ref('BotId'),
    created_at: { type: 'string' },
    mode: { enum: ['stop', 'live', 'pre'] },
    downtime_ms: { type: ['integer', 'null'], minimum: 0, description: 'how long the bot was stopped for it (stop mode)' },
    pre: {
      type: 'object',
      description: 'mode pre: what its command did in the bot before the copy',
      required: ['command', 'exit_code', 'output', 'output_truncated'],
      additionalProperties: false,
      properties: { command: { type: 'array', items: { type: 'string' } }, exit_code: { type: ['integer', 'null'] }, output: { type: 'string' }, output_truncated: { type: 'boolean' } },
    },
    size_bytes: { type: 'integer', minimum: 0 },
    locked: { type: 'boolean', description: 'never removed, by retention or by hand, while locked' },
    verification: {
      description: 'its last verification, null until one is made',
      oneOf: [
        { type: 'null' },
        { type: 'object', required: ['at', 'ok'], additionalProperties: false, properties: { at: { type: 'string' }, ok: { type: 'boolean' }, message: { type: 'string' } } },
      ],
    },
    copies: {
      type: 'array',
      description: 'its copies to stores (AGENT_BACKUP_STORES), as they were made',
      items: { type: 'object', required: ['store', 'at', 'ok'], additionalProperties: false, properties: { store: { type: 'string' }, at: { type: 'string' }, ok: { type: 'boolean' }, message: { type: 'string' } } },
    },
    folders: {
      type: 'array',
      items: {
        type: 'object',
        required: ['path', 'file', 'size_bytes', 'sha256'],
        additionalProperties: false,
        properties: { path: { type: 'string' }, file: { type: 'string' }, size_bytes: { type: 'integer', minimum: 0 }, sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' } },
      },
    },
  },
};
const unprocessableSchedule = { description: 'An unknown field, a bad expression, zone or bound, or an action this agent cannot run: `msg` names the field', content: json(ref('Failure')) };

const ok = (description: string, schema = ref('Message')) => ({ description, content: json(schema) });
const lifecycleFailures = [400, 403, 404, 413, 415, 429, 500, 503];
/** A stop or start may also be dropped behind another operation (409 `... in progress`). */
const powerFailures = [...lifecycleFailures, 409];
/** A read of a container the engine is removing or switching (a deploy) is its 409, `busy in the engine`. */
const readFailures = [400, 403, 404, 409, 413, 415, 429, 500, 503];

/** What a client can do next with a bot it has just created: the same id and owner. */
const createdBot = { bot_id: '$request.body#/bot_id' };
const ownedBot = { requestBody: { bot_id: '$request.body#/bot_id', user_id: '$request.body#/user_id' } };
const botLinks = {
  GetBotStatus: { operationId: 'getBot', parameters: createdBot },
  GetBotStats: { operationId: 'getBotStats', parameters: createdBot },
  GetBotExits: { operationId: 'getBotExits', parameters: createdBot },
  ReadBotLogs: { operationId: 'readBotLogs', requestBody: { bot_id: '$request.body#/bot_id' } },
  StopBot: { operationId: 'stopBot', ...ownedBot },
  StartBot: { operationId: 'startBot', ...ownedBot },
  RestartBot: { operationId: 'restartBot', ...ownedBot },
  RemoveBot: { operationId: 'removeBot', parameters: createdBot },
};

const exitRecordFields = {
  at: { type: 'string', description: 'ISO 8601: when the run ended' },
  exit_code: { type: ['integer', 'null'] },
  signal: { type: ['string', 'null'], examples: ['SIGKILL'] },
  oom_killed: { type: 'boolean' },
  requested: { type: 'boolean', description: 'a stop, restart, kill or delete (through the agent or the runtime) ended it' },
  started_at: { type: ['string', 'null'] },
  unhealthy: {
    description: 'the watchdog, or the kubelet on a failed liveness probe, ended this run for its health (docs/api.md §13)',
    oneOf: [ref('UnhealthyEnd'), { type: 'null' }],
  },
};
const exitRecord = {
  type: 'object',
  required: [...Object.keys(exitRecordFields), 'logs'],
  additionalProperties: false,
  properties: { ...exitRecordFields, logs: { type: 'string', description: 'the last (up to 100) lines of that run, captured when it ended' } },
};
/** An exit record without its lines, as the console's table carries the last one. */
const exitSummary = { type: 'object', required: Object.keys(exitRecordFields), additionalProperties: false, properties: exitRecordFields };

/** The revisions' answer also says whether the runtime deploys at all (Kubernetes: not yet). */
const withDeploys = (schema: ReturnType<typeof answer>) => ({
  ...schema,
  required: [...schema.required, 'deploys', 'current'],
  properties: {
    ...schema.properties,
    deploys: { type: 'boolean', description: 'false where the runtime has no deploys yet (docs/api.md §15)' },
    current: { type: ['integer', 'null'], minimum: 1, description: 'the revision the bot runs now; null where the runtime has no deploys, or the bot is gone' },
  },
});

/** A successful answer: `ok` and one field. */
const answer = (field: string, schema: object) => ({
  type: 'object',
  required: ['ok', field],
  additionalProperties: false,
  properties: { ok: { const: true }, [field]: schema },
});

/** The bots' list with its count and, where a page has more after it, the cursor to the next (docs/api.md §2). */
const withPaging = (list: ReturnType<typeof answer>) => ({
  ...list,
  required: [...list.required, 'total'],
  properties: {
    ...list.properties,
    total: { type: 'integer', minimum: 0, description: 'every bot the query names (of `user_id`, where given), in all pages' },
    next: { type: 'string', description: 'where a page (`limit`) has more after it: its last bot id, to ask for as `after`' },
  },
});

/** A node's name (AGENT_NODE, docs/api.md §17). */
const nodeName = { type: 'string', pattern: NODE_NAME.source, description: "the node whose runtime holds the bot, or a fleet's node (AGENT_NODE, docs/api.md §17)" };

/** A bot's status as GET /api/bots/{bot_id} answers it (docs/api.md §8). */
const statusFields = {
  bot_id: ref('BotId'),
  user_id: { type: ['string', 'null'] },
  state: { enum: ['running', 'stopped', 'exited', 'crash-looping', 'given-up'] },
  started_at: { type: ['string', 'null'] },
  uptime: { type: ['string', 'null'], pattern: '^\\d+h \\d+m$' },
  crashes_last_hour: { type: 'integer', minimum: 0 },
  last_exit: { oneOf: [ref('ExitRecord'), { type: 'null' }] },
  health: ref('Health'),
  node: nodeName,
};

/** A bot as the console's table shows it (docs/api.md §12): its status, and more. */
const fleetFields = {
  ...statusFields,
  template: { type: ['string', 'null'] },
  image: { type: ['string', 'null'], description: 'the image it runs, as it was asked for; null on the rows of a node away' },
  revision: { type: ['integer', 'null'], minimum: 1, description: 'the revision it runs (docs/api.md §15); null on the rows of a node away' },
  next_schedule: {
    description: "the bot's next scheduled run this agent watches, and its first action (docs/api.md §18)",
    oneOf: [{ type: 'object', required: ['at', 'action'], additionalProperties: false, properties: { at: { type: 'string' }, action: { type: 'string' } } }, { type: 'null' }],
  },
  restarts_last_hour: { type: 'integer', minimum: 0, description: 'runs that ended in the last hour, requested or not' },
  last_exit: { oneOf: [exitSummary, { type: 'null' }] },
  sparkline: {
    type: 'object',
    description: 'the samples of GET /api/bots/{bot_id}/stats/history, as two arrays',
    required: ['cpu_percent', 'memory_bytes'],
    additionalProperties: false,
    properties: {
      cpu_percent: { type: 'array', items: { type: 'number', minimum: 0 } },
      memory_bytes: { type: 'array', items: { type: 'number', minimum: 0 } },
    },
  },
};

/** The agent's API as OpenAPI 3.1, served at /openapi.json. */
export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'bot-agent',
    version: '1.0',
    description:
      'Lets a hosted bot, or its owner, restart, stop, start, read the logs of and read the resource stats of that bot. ' +
      'A request from a bot container is that bot, which may manage only itself; loopback or the admin token is the platform.',
  },
  components: {
    securitySchemes: { adminToken: { type: 'http', scheme: 'bearer' } },
    schemas: {
      BotId: { ...jsonSchemaOf(pathBotId), examples: ['bot_12_34_abc'] },
      OwnerRequest: jsonSchemaOf(ownerRequest),
      LogsRequest: jsonSchemaOf(logsRequest),
      Message: answer('message', { type: 'string' }),
      Logs: answer('logs', { type: 'string' }),
      LogHistory: {
        type: 'object',
        required: ['ok', 'bot_id', 'from', 'lines', 'next', 'partial'],
        additionalProperties: false,
        properties: {
          ok: { const: true },
          bot_id: ref('BotId'),
          from: { enum: ['database', 'agent'], description: "Where the lines were found: the log database (AGENT_LOG_DATABASE_URL), or this agent's own history" },
          lines: {
            type: 'array',
            items: {
              type: 'object',
              required: ['at', 'run', 'stream', 'line'],
              additionalProperties: false,
              properties: {
                at: { type: 'string', description: 'ISO 8601: when the line was written' },
                run: { type: ['string', 'null'], description: 'ISO 8601: the start of the run that wrote it; null where not known' },
                stream: { enum: ['stdout', 'stderr', 'agent'] },
                line: { type: 'string' },
              },
            },
          },
          next: { type: ['string', 'null'], description: "The cursor of the next page (in a fleet, every node's place: pass it back as it is); null when no line is left" },
          partial: { type: 'boolean', description: 'The search stopped at its time budget: more lines may be found from `next`' },
          nodes_missing: { type: 'array', items: { type: 'string' }, description: 'In a fleet: the nodes that gave no answer in time, asked again by the next page' },
        },
      },
      Stats: answer('stats', {
        type: 'object',
        required: ['cpu_percent', 'memory_usage', 'memory_percent', 'uptime', 'memory_bytes', 'memory_limit_bytes', 'uptime_s', 'network_rx_bytes', 'network_tx_bytes', 'block_read_bytes', 'block_write_bytes'],
        additionalProperties: false,
        properties: {
          cpu_percent: { type: 'number', minimum: 0 },
          memory_usage: { type: 'string', pattern: '^\\d+\\.\\d\\d MB$' },
          memory_percent: { type: 'number', minimum: 0 },
          uptime: { type: 'string', pattern: '^\\d+h \\d+m$' },
          memory_bytes: { type: 'integer', minimum: 0, description: 'memory in use, page cache excluded, in bytes (what memory_usage says in MB)' },
          memory_limit_bytes: { type: 'integer', minimum: 0, description: "what memory_percent is taken against, in bytes: the bot's memory limit, else the host's memory (on Kubernetes the pod's limit, else the node's allocatable memory)" },
          uptime_s: { type: 'integer', minimum: 0, description: "the current run's uptime in whole seconds (what uptime says in hours and minutes)" },
          network_rx_bytes: { type: ['integer', 'null'], minimum: 0, description: 'bytes the run has received over the network, loopback left out; null where the runtime does not tell (Kubernetes, host networking)' },
          network_tx_bytes: { type: ['integer', 'null'], minimum: 0, description: 'bytes the run has sent over the network, loopback left out; null where the runtime does not tell' },
          block_read_bytes: { type: ['integer', 'null'], minimum: 0, description: 'bytes the run has read from block devices; null where the runtime does not tell (Kubernetes)' },
          block_write_bytes: { type: ['integer', 'null'], minimum: 0, description: 'bytes the run has written to block devices; null where the runtime does not tell (Kubernetes)' },
        },
      }),
      AlertRequest: alertRequestSchema(),
      FleetLogHistory: {
        type: 'object',
        required: ['ok', 'lines', 'partial', 'nodes_missing'],
        additionalProperties: false,
        properties: {
          ok: { const: true },
          lines: {
            type: 'array',
            items: {
              type: 'object',
              required: ['bot_id', 'node', 'at', 'run', 'stream', 'line'],
              additionalProperties: false,
              properties: {
                bot_id: ref('BotId'),
                node: { type: 'string' },
                at: { type: 'string' },
                run: { type: ['string', 'null'] },
                stream: { enum: ['stdout', 'stderr', 'agent'] },
                line: { type: 'string' },
              },
            },
          },
          partial: { type: 'boolean', description: 'A node or a search stopped at its time budget: more lines may match' },
          nodes_missing: { type: 'array', items: { type: 'string' }, description: 'Nodes that gave no answer in time' },
        },
      },
      Alert: {
        type: 'object',
        required: ['id', 'name', 'bot_id', 'kind', 'cooldown_s', 'created_at'],
        additionalProperties: false,
        properties: {
          id: { type: 'string', pattern: '^alr_[0-9a-f]{16}$' },
          name: { type: 'string' },
          bot_id: { anyOf: [ref('BotId'), { type: 'null' }] },
          kind: { enum: ['line', 'cpu', 'memory', 'silence'] },
          q: { type: 'string' },
          regex: { type: 'string' },
          stream: { enum: ['stdout', 'stderr'] },
          above_percent: { type: 'number' },
          window_s: { type: 'integer' },
          silent_s: { type: 'integer' },
          cooldown_s: { type: 'integer' },
          created_at: { type: 'string', description: 'ISO 8601' },
        },
      },
      BackupRequest: { ...closedKeep(jsonSchemaOf(backupRequest)), ...PRE_RULE },
      RetentionPolicy: (closedKeep(jsonSchemaOf(backupRequest)).properties as Record<string, JsonSchema>).keep!,
      Backup: answer('backup', backupAnswer),
      Backups: answer('backups', { type: 'array', items: backupAnswer }),
      BackupMade: {
        type: 'object',
        required: ['ok', 'message', 'backup', 'removed'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, backup: backupAnswer, removed: { type: 'array', items: { type: 'string' }, description: 'the backups retention removed' } },
      },
      RestoreRequest: jsonSchemaOf(restoreRequest),
      Restored: {
        type: 'object',
        required: ['ok', 'message', 'backup', 'before'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, backup: backupAnswer, before: { ...backupAnswer, description: "the bot's data as it was before the restore, kept as a backup" } },
      },
      Verified: {
        type: 'object',
        required: ['ok', 'message', 'backup'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, backup: backupAnswer },
      },
      ScheduleRequest: scheduleBody(['cron', 'actions']),
      ScheduleChange: scheduleBody([]),
      Schedule: answer('schedule', scheduleAnswer),
      Schedules: answer('schedules', { type: 'array', maxItems: SCHEDULES_PER_BOT, items: scheduleAnswer }),
      ScheduleRuns: answer('runs', { type: 'array', maxItems: 100, items: scheduleRun }),
      RunStarted: {
        type: 'object',
        required: ['ok', 'message', 'run'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, run: scheduleRun },
      },
      CreateBotRequest: jsonSchemaOf(createBotRequest),
      DeployRequest: jsonSchemaOf(deployRequest),
      MoveRequest: jsonSchemaOf(moveRequest),
      DrainRequest: jsonSchemaOf(drainRequest),
      Drained: {
        type: 'object',
        required: ['ok', 'message', 'node', 'bots'],
        additionalProperties: false,
        properties: {
          ok: { const: true },
          message: { type: 'string' },
          node: nodeName,
          bots: {
            type: 'array',
            items: {
              type: 'object',
              required: ['bot_id', 'outcome'],
              additionalProperties: false,
              properties: {
                bot_id: ref('BotId'),
                outcome: { enum: ['moved', 'stopped', 'failed'] },
                msg: { type: 'string', description: 'why it failed, as its own call would have said' },
              },
            },
          },
        },
      },
      FleetCreateRequest: jsonSchemaOf(fleetCreateRequest),
      FleetDataRequest: jsonSchemaOf(fleetDataRequest),
      Moved: {
        type: 'object',
        required: ['ok', 'message', 'node'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, node: nodeName },
      },
      ChatsTested: {
        type: 'object',
        required: ['ok', 'message', 'targets'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, targets: { type: 'array', items: { enum: ['discord', 'slack', 'telegram', 'ntfy'] } } },
      },
      BotChatsRequest: jsonSchemaOf(botChatsRequest),
      BotChatsShown: {
        type: 'object',
        required: ['targets', 'events'],
        additionalProperties: false,
        properties: {
          targets: { type: 'array', items: { enum: ['discord', 'slack', 'telegram', 'ntfy'] }, description: "the bot's own chats; never their URLs or tokens" },
          events: { type: 'array', items: { type: 'string' } },
        },
      },
      BotChats: {
        type: 'object',
        required: ['ok', 'chats'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, chats: ref('BotChatsShown') },
      },
      Deployed: {
        type: 'object',
        required: ['ok', 'message', 'revision'],
        additionalProperties: false,
        properties: { ok: { const: true }, message: { type: 'string' }, revision: { type: 'integer', minimum: 1 } },
      },
      Revisions: withDeploys(answer('revisions', {
        type: 'array',
        maxItems: 20,
        items: {
          type: 'object',
          required: ['revision', 'spec', 'by', 'at', 'outcome', 'reason', 'ended_at'],
          additionalProperties: false,
          properties: {
            revision: { type: 'integer', minimum: 1 },
            spec: { type: 'object', description: 'image, command, env (the names of its variables, never their values), memory_limit, cpu_limit, health' },
            by: { type: 'string' },
            at: { type: 'string', description: 'ISO 8601' },
            outcome: { enum: ['deploying', 'succeeded', 'failed', 'rolled-back', 'interrupted'] },
            reason: { type: ['string', 'null'] },
            ended_at: { type: ['string', 'null'], description: 'ISO 8601' },
          },
        },
      })),
      BotList: withPaging(answer('bots', {
        type: 'array',
        items: {
          type: 'object',
          required: ['bot_id', 'state'],
          additionalProperties: false,
          properties: {
            bot_id: ref('BotId'),
            user_id: { type: 'string' },
            template: { type: 'string' },
            state: { enum: ['running', 'stopped'] },
            started_at: { type: 'string', description: 'ISO 8601 time' },
            image: { type: 'string', description: 'the image it runs, as it was asked for' },
            revision: { type: 'integer', minimum: 1, description: 'the revision it runs (docs/api.md §15)' },
            node: nodeName,
          },
        },
      })),
      NodeList: {
        type: 'object',
        required: ['ok', 'node', 'nodes'],
        additionalProperties: false,
        properties: {
          ok: { const: true },
          node: nodeName,
          nodes: {
            type: 'array',
            items: {
              type: 'object',
              required: ['node', 'url', 'alive', 'seen_at', 'bots', 'running', 'self'],
              additionalProperties: false,
              properties: {
                node: nodeName,
                url: { type: ['string', 'null'], description: 'where the other agents reach its agent (AGENT_NODE_URL)' },
                alive: { type: 'boolean', description: 'its agent said so within the last 15 s' },
                seen_at: { type: 'string', description: 'when its agent last said it is alive (ISO 8601)' },
                bots: { type: 'integer', minimum: 0, description: 'the bots its runtime holds, as its agent last said' },
                running: { type: 'integer', minimum: 0 },
                self: { type: 'boolean', description: 'the node of the agent that answers' },
                refused: { type: 'string', description: "why its row is not taken for a node of the fleet's (not sealed with the fleet key, or alive at a time still to come): no call goes to it" },
              },
            },
          },
        },
      },
      ExitRecord: exitRecord,
      Health: {
        type: 'object',
        description: "the bot's health (docs/api.md §13): its runtime's check, or its heartbeats",
        required: ['status', 'check', 'since', 'output'],
        additionalProperties: false,
        properties: {
          status: { enum: ['healthy', 'unhealthy', 'starting', 'none'] },
          check: { oneOf: [{ enum: ['exec', 'heartbeat'] }, { type: 'null' }] },
          since: { type: ['string', 'null'], description: 'ISO 8601' },
          output: { type: ['string', 'null'], maxLength: HEALTH_OUTPUT_MAX, description: "the last failing check's output; for heartbeats, how long none came" },
        },
      },
      UnhealthyEnd: {
        type: 'object',
        required: ['check', 'output'],
        additionalProperties: false,
        properties: { check: { enum: ['exec', 'heartbeat'] }, output: { type: ['string', 'null'], maxLength: HEALTH_OUTPUT_MAX } },
      },
      HeartbeatRequest: jsonSchemaOf(heartbeatRequest),
      BotStatus: answer('bot', {
        type: 'object',
        required: [...Object.keys(statusFields), 'data'],
        additionalProperties: false,
        properties: {
          ...statusFields,
          data: {
            type: 'array',
            description: "the bot's data folders (docs/api.md §19): what each may hold, and what it used when last measured (null before a measure)",
            items: {
              type: 'object',
              required: ['path', 'size_mb', 'used_bytes', 'measured_at'],
              additionalProperties: false,
              properties: { path: { type: 'string' }, size_mb: { type: ['integer', 'null'] }, used_bytes: { type: ['integer', 'null'], minimum: 0 }, measured_at: { type: ['string', 'null'] } },
            },
          },
        },
      }),
      Exits: answer('exits', { type: 'array', items: ref('ExitRecord'), maxItems: 50 }),
      StatsHistory: answer('samples', {
        type: 'array',
        description: 'the last 15 minutes, oldest first, one sample each 15 s',
        maxItems: 61,
        items: {
          type: 'object',
          required: ['at', 'cpu_percent', 'memory_bytes', 'network_rx_bytes', 'network_tx_bytes'],
          additionalProperties: false,
          properties: {
            at: { type: 'string', description: 'ISO 8601 time of the sample' },
            cpu_percent: { type: 'number', minimum: 0 },
            memory_bytes: { type: 'number', minimum: 0 },
            network_rx_bytes: { type: ['number', 'null'], minimum: 0, description: "the run's bytes received so far, as its stats say; null where the runtime does not tell" },
            network_tx_bytes: { type: ['number', 'null'], minimum: 0, description: "the run's bytes sent so far; null where the runtime does not tell" },
          },
        },
      }),
      Fleet: answer('bots', {
        type: 'array',
        items: {
          type: 'object',
          required: [...Object.keys(fleetFields)],
          additionalProperties: false,
          properties: {
            ...fleetFields,
            last_known: {
              type: 'string',
              description: "only on the rows of a node whose agent is away or did not answer: the bot as that agent last said, at this time (ISO 8601; docs/api.md §17)",
            },
          },
        },
      }),
      SessionRequest: jsonSchemaOf(sessionRequest),
      BotToken: answer('token', { type: 'string', pattern: '^bat[12]\\.' }),
      Failure: {
        type: 'object',
        required: ['ok', 'msg'],
        properties: { ok: { const: false }, msg: { type: 'string' } },
        additionalProperties: false,
      },
    },
  },
  security: [{}, { adminToken: [] }],
  paths: {
    '/api/bots/self/restart': {
      post: {
        summary: 'Restart the calling bot (or, for the platform, the bot in X-Bot-ID)',
        parameters: [
          {
            name: 'X-Bot-ID',
            in: 'header',
            // Required of the platform, whose address names no bot; a bot calling from its own container may leave it out.
            required: true,
            description: 'The bot to restart. A bot calling from its own container may leave it out: its address names it.',
            schema: ref('BotId'),
          },
        ],
        responses: responses(
          ok('The bot restarts (a bot calling for itself is answered first)'),
          ...lifecycleFailures,
          409,
          504,
        ),
      },
    },
    '/api/bots/restart': {
      post: {
        operationId: 'restartBot',
        summary: 'Restart a bot; answers once it runs again',
        requestBody: { required: true, content: json(ref('OwnerRequest')) },
        responses: responses(ok('Restarted'), ...lifecycleFailures, 409, 504),
      },
    },
    '/api/bots/stop': {
      post: {
        operationId: 'stopBot',
        summary: 'Stop a bot (idempotent)',
        requestBody: { required: true, content: json(ref('OwnerRequest')) },
        responses: responses(ok('Stopped, or already stopped'), ...powerFailures),
      },
    },
    '/api/bots/start': {
      post: {
        operationId: 'startBot',
        summary: 'Start a bot (idempotent)',
        requestBody: { required: true, content: json(ref('OwnerRequest')) },
        responses: responses(ok('Started, or already running'), ...powerFailures),
      },
    },
    '/api/bots/self/heartbeat': {
      post: {
        summary: "The calling bot's word that it is well: it turns unhealthy when none comes for `ttl_s` (docs/api.md §13). A bot's own call only; X-Bot-ID, when sent, must name it",
        // A bot may also send X-Bot-ID (its own id; another's is 403), as the clients do. It is left out here: for an
        // optional header schemathesis' coverage phase sent values the pattern refuses as if they were valid.
        requestBody: { required: false, content: json(ref('HeartbeatRequest')) },
        responses: responses(ok('The beat is taken'), 400, 403, 404, 413, 415, 429, 500, 503),
      },
    },
    '/api/bots/logs': {
      post: {
        operationId: 'readBotLogs',
        summary: "The last `lines` lines of a bot's stdout and stderr, at most 4 MiB (the newest whole lines); within since and until where given",
        requestBody: { required: true, content: json(ref('LogsRequest')) },
        // 422: since not before until.
        responses: responses(ok('The log text', ref('Logs')), ...readFailures, 422),
      },
    },
    '/api/bots/{bot_id}/logs': {
      get: {
        summary:
          "The last `lines` lines of a bot's stdout and stderr (as POST /api/bots/logs); with follow=true, " +
          'a text/event-stream of those lines and then each new one (`event: log`), an `exited` event when a run ends, ' +
          'and the next run\'s lines, until the client leaves',
        parameters: [botIdParameter, ...queryParameters(logsQuery)],
        responses: responses(
          { description: 'The log text; or, with follow=true, the stream', content: { ...json(ref('Logs')), ...logStream } },
          400,
          403,
          404,
          409,
          // since not before until, or either with follow=true.
          422,
          429,
          500,
          503,
        ),
      },
    },
    '/api/bots/{bot_id}/logs/history': {
      get: {
        summary:
          "A bot's kept output across its runs (docs/api.md §21), searched by time, run, substring, RE2 regular expression and " +
          'stream, newest or oldest first, a page at a time: the bot itself, or the platform',
        parameters: [botIdParameter, ...queryParameters(logHistoryQuery)],
        responses: responses(ok('The lines found', ref('LogHistory')), 400, 403, 404, 409, 429, 500, 501, 503),
      },
    },
    '/api/logs/history': {
      get: {
        summary:
          "Every bot's kept output, searched on every node of the fleet and merged by time (docs/api.md §21): by time, owner, node, " +
          'substring, RE2 regular expression and stream, newest or oldest first; the platform only',
        parameters: queryParameters(fleetLogHistoryQuery),
        responses: responses({ description: 'The lines found', content: json(ref('FleetLogHistory')) }, 400, 403, 429, 500, 501, 503),
      },
    },
    '/api/bots/{bot_id}': {
      get: {
        operationId: 'getBot',
        summary: "A bot's state, its crashes in the last hour and how its last run ended",
        parameters: [botIdParameter],
        responses: responses(ok('The status', ref('BotStatus')), 400, 403, 404, 409, 429, 500, 503),
      },
    },
    '/api/bots/{bot_id}/exits': {
      get: {
        operationId: 'getBotExits',
        summary: "How the bot's runs ended, newest first (the last 50 are kept, across restarts of the agent)",
        parameters: [botIdParameter, ...queryParameters(exitsQuery)],
        responses: responses(ok('The exit records', ref('Exits')), 400, 403, 404, 409, 429, 500, 503),
      },
    },
    '/api/bots/{bot_id}/revisions': {
      get: {
        summary: "The bot's revisions, newest first (the last 20): what each ran, who made it, when, and how it ended (docs/api.md §15)",
        parameters: [botIdParameter],
        responses: responses(ok('The revisions', ref('Revisions')), 400, 403, 404, 429, 500, 503),
      },
    },
    '/api/bots/{bot_id}/events': {
      get: {
        summary:
          "The bot's events as Server-Sent Events (started, exited, crash-looping, recovered, operation); " +
          'Last-Event-ID or `after` resumes after a cursor',
        parameters: [botIdParameter, lastEventId, ...queryParameters(eventsQuery)],
        responses: responses({ description: 'The event stream', content: eventStream }, 400, 403, 404, 409, 429, 500, 503),
      },
    },
    '/api/events': {
      get: {
        summary: "Every bot's events as Server-Sent Events (the platform only)",
        parameters: [lastEventId, ...queryParameters(eventsQuery)],
        responses: responses({ description: 'The event stream', content: eventStream }, 400, 403, 429),
      },
    },
    '/api/bots/{bot_id}/stats': {
      get: {
        operationId: 'getBotStats',
        summary: "A running bot's CPU, memory and uptime",
        parameters: [botIdParameter],
        responses: responses(ok('The stats', ref('Stats')), 400, 403, 404, 409, 429, 500, 503),
      },
    },
    '/api/bots/{bot_id}/stats/history': {
      get: {
        operationId: 'getBotStatsHistory',
        summary: "A bot's CPU, memory and network of the last 15 minutes, sampled every 15 s, kept across the agent's restarts (the platform only)",
        parameters: [botIdParameter],
        responses: responses(ok('The samples', ref('StatsHistory')), 400, 403, 404, 500, 503),
      },
    },
    '/api/console/fleet': {
      get: {
        summary: "Every bot's status, with its restarts in the last hour and its CPU and memory samples: the console's table (the platform only)",
        responses: responses(ok('The bots', ref('Fleet')), 403, 500, 503),
      },
    },
    '/api/session': {
      post: {
        summary: 'Exchange the admin token for a console session: an HttpOnly, SameSite=Strict cookie valid 12 hours',
        requestBody: { required: true, content: json(ref('SessionRequest')) },
        responses: responses(ok('The session cookie is set'), 400, 403, 413, 415),
      },
      delete: {
        summary: 'End the console session the cookie carries',
        responses: responses(ok('Ended')),
      },
    },
    '/': {
      get: {
        summary: 'The operator\'s console, to a browser asking for text/html (never to a bot)',
        responses: {
          '200': { description: 'The console page', content: { 'text/html': { schema: { type: 'string' } } } },
          '403': { description: 'A bot asked for it', content: json(ref('Failure')) },
          '404': { description: 'Not asked for as text/html, or the console was not built', content: json(ref('Failure')) },
        },
      },
    },
    '/console/{file}': {
      get: {
        summary: "The console's scripts and styles, named by their content's hash and cached for good (never to a bot)",
        parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'The file', content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } } },
          '403': { description: 'A bot asked for it', content: json(ref('Failure')) },
          '404': { description: 'No such file', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots': {
      post: {
        summary: 'Create and start a bot with the full bot environment (the platform only)',
        requestBody: { required: true, content: json(ref('CreateBotRequest')) },
        responses: {
          ...responsesWith('201', { ...ok('Created and started'), links: botLinks }, 400, 413, 415, 500, 501, 503),
          '403': { description: `${failureText[403]}; or the registry refused the pull's login, or wants one (docs/api.md §14)`, content: json(ref('Failure')) },
          '409': { description: 'A bot with this id exists', content: json(ref('Failure')) },
          '422': { description: `${failureText[422]}; or its image (or tag) is not in its registry (docs/api.md §14); or it names a node that is not this agent's and not one of the fleet it passes creates to (docs/api.md §17); or a data folder breaks a rule of docs/api.md §19`, content: json(ref('Failure')) },
          '502': { description: "The image's registry cannot be reached, or failed the pull (docs/api.md §14)", content: json(ref('Failure')) },
          '504': { description: 'The pull of the image took longer than AGENT_PULL_TIMEOUT_S; it was abandoned (docs/api.md §14)', content: json(ref('Failure')) },
        },
      },
      get: {
        summary: 'Every bot, or those of `user_id` (the platform only)',
        parameters: queryParameters(listBotsQuery),
        responses: responses(ok('The bots', ref('BotList')), 400, 403, 500, 501, 503),
      },
    },
    '/api/admin/nodes': {
      get: {
        summary: "The fleet's nodes: each alive or away, with its bots counted (docs/api.md §17; the platform only)",
        responses: responses(ok('The nodes', ref('NodeList')), 403, 500, 503),
      },
    },
    '/api/admin/bots/{bot_id}/move': {
      post: {
        summary: "Move the bot to another node of the fleet: stopped here, made there as it is, removed here (docs/api.md §17; the platform only)",
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        requestBody: { required: true, content: json(ref('MoveRequest')) },
        responses: {
          ...responses(ok('Moved', ref('Moved')), 400, 403, 404, 413, 415, 500, 501),
          '409': { description: 'The bot is on that node already; or the other node holds a bot of that id', content: json(ref('Failure')) },
          '422': { description: 'No fleet (AGENT_FLEET_KEY), a node the fleet lacks, a bot no agent made; or the other node cannot make it as it is (its image there: docs/api.md §14), or take in its data (docs/api.md §20)', content: json(ref('Failure')) },
          '502': { description: "The other node's agent failed to make it (its words passed on); the bot stays where it was", content: json(ref('Failure')) },
          '503': { description: 'The other node is away or does not answer: the bot stays where it was', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/nodes/{node}/drain': {
      post: {
        summary: "Drain a node: every bot on it moved to `to`, or stopped without one, one at a time (docs/api.md §17; the platform only)",
        parameters: [{ name: 'node', in: 'path', required: true, schema: nodeName }],
        requestBody: { required: false, content: json(ref('DrainRequest')) },
        responses: {
          ...responses(ok("Drained: each bot's outcome", ref('Drained')), 400, 403, 413, 415, 500, 501),
          '404': { description: 'A node the fleet lacks', content: json(ref('Failure')) },
          '422': { description: 'A node drained to itself; or another node named where this agent has no fleet (AGENT_FLEET_KEY)', content: json(ref('Failure')) },
          '503': { description: 'The drained node is away or does not answer', content: json(ref('Failure')) },
        },
      },
    },
    '/api/fleet/bots': {
      post: {
        summary: "Another agent of the fleet makes here a bot it moves (Authorization: Fleet <AGENT_FLEET_KEY> only; docs/api.md §17)",
        requestBody: { required: true, content: json(ref('FleetCreateRequest')) },
        responses: {
          ...responsesWith('201', ok('Made, stopped until the fleet places it here'), 400, 403, 413, 415, 500, 501, 503),
          '409': { description: 'A bot with this id exists on this node', content: json(ref('Failure')) },
          '422': { description: `${failureText[422]}; or its image (or tag) is not in its registry (docs/api.md §14); or this node's image of that name is not the one the bot runs (\`image_id\`)`, content: json(ref('Failure')) },
          '502': { description: "The image's registry cannot be reached, or failed the pull (docs/api.md §14)", content: json(ref('Failure')) },
          '504': { description: 'The pull of the image took longer than AGENT_PULL_TIMEOUT_S (docs/api.md §14)', content: json(ref('Failure')) },
        },
      },
    },
    '/api/fleet/bots/{bot_id}/data': {
      post: {
        summary: "The agent that moves a bot here with its data: its backup on that node, taken in and restored into the copy made here (Authorization: Fleet <AGENT_FLEET_KEY> only; docs/api.md §17)",
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        requestBody: { required: true, content: json(ref('FleetDataRequest')) },
        responses: {
          ...responses(ok('Taken in', ref('Backup')), 400, 403, 404, 409, 413, 415, 500, 501, 503, 507),
          '422': { description: 'A node the fleet lacks; this agent keeps no backups; or the backup is refused as any restore refuses it (docs/api.md §20)', content: json(ref('Failure')) },
        },
      },
    },
    '/api/fleet/bots/{bot_id}/start': {
      post: {
        summary: 'The agent that moved a bot here starts it, once the fleet places it here (Authorization: Fleet <AGENT_FLEET_KEY> only; docs/fleet.md)',
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        responses: {
          ...responses(ok('Started'), 400, 403, 404, 500, 501, 503),
          '409': { description: 'The fleet places the bot on another node: its copy here does not start', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots/{bot_id}/rollback': {
      post: {
        summary: 'Go back to the previous revision, kept stopped since the last deploy (docs/api.md §15; the platform only)',
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        responses: {
          ...responses(ok('Rolled back', ref('Deployed')), 400, 403, 500, 501, 503),
          '404': { description: '`container not found`: no such bot; or `no previous revision`: none kept to go back to', content: json(ref('Failure')) },
          '409': { description: '`deploy in progress`: another deploy or rollback holds the bot', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/notifications/test': {
      post: {
        summary: 'Send a test message to every configured chat (docs/api.md §16; the platform only)',
        responses: {
          ...responses(ok('Every chat took it', ref('ChatsTested')), 403),
          '409': { description: '`no chat is configured`', content: json(ref('Failure')) },
          '502': { description: 'A chat did not take it: `msg` names which and why', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/alerts': {
      get: {
        summary: 'Every alert rule (docs/api.md §22; the platform only)',
        responses: responses({ description: 'The rules', content: json(answer('alerts', { type: 'array', items: ref('Alert') })) }, 403, 500, 503),
      },
      post: {
        summary: 'An alert rule: a line that matches, CPU or memory above a threshold for a window, or no line for a while, of one bot or every bot (docs/api.md §22; the platform only)',
        requestBody: { required: true, content: json(ref('AlertRequest')) },
        responses: {
          ...responsesWith(
            '201',
            { description: 'Made', content: json({ type: 'object', required: ['ok', 'message', 'alert'], additionalProperties: false, properties: { ok: { const: true }, message: { type: 'string' }, alert: ref('Alert') } }) },
            400,
            403,
            404,
            413,
            415,
            500,
            503,
          ),
          '422': { description: 'A line or silence rule where the agent keeps no log history (AGENT_LOG_HISTORY=off)', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/alerts/{alert_id}': {
      get: {
        summary: 'One alert rule (docs/api.md §22; the platform only)',
        parameters: [alertIdParameter],
        responses: responses({ description: 'The rule', content: json(answer('alert', ref('Alert'))) }, 400, 403, 404, 500, 503),
      },
      delete: {
        summary: 'Removes an alert rule (docs/api.md §22; the platform only)',
        parameters: [alertIdParameter],
        responses: responses(ok('Removed'), 400, 403, 404, 500, 503),
      },
    },
    '/api/admin/bots/{bot_id}/backups': {
      get: {
        summary: "The bot's backups in the agent's backup folder, or in the store `store` names, newest first (docs/api.md §20; the platform only)",
        parameters: [botIdParameter, ...queryParameters(backupStoreQuery)],
        responses: { ...responses(ok('The backups', ref('Backups')), ...backupFailures), ...storeFailures },
      },
      post: {
        summary: "A backup of the bot's data folders now, in stop mode (the default) or live (docs/api.md §20; the platform only)",
        parameters: [botIdParameter],
        requestBody: { required: false, content: json(ref('BackupRequest')) },
        responses: {
          ...responsesWith('201', ok('Made', ref('BackupMade')), ...backupFailures, 413, 415, 500, 503, 507),
          '409': { description: 'A backup of the bot is under way, or its stop or start waited behind another operation', content: json(ref('Failure')) },
          '422': { description: 'The bot has no data folders, or a store named is not configured', content: json(ref('Failure')) },
          '502': { description: "A store's copy failed (the backup is kept in the agent's folder, the copy's failure in its `copies`)", content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots/{bot_id}/backups/{backup_id}': {
      get: {
        summary: 'One backup, of the agent\'s folder or of the store `store` names (docs/api.md §20; the platform only)',
        parameters: [botIdParameter, backupIdParameter, ...queryParameters(backupStoreQuery)],
        responses: { ...responses(ok('The backup', ref('Backup')), ...backupFailures), ...storeFailures },
      },
      delete: {
        summary: 'Remove a backup from the agent\'s folder, or from the store `store` names (docs/api.md §20; the platform only)',
        parameters: [botIdParameter, backupIdParameter, ...queryParameters(backupStoreQuery)],
        responses: { ...responses(ok('Removed'), ...backupFailures), '409': { description: 'The backup is locked (in the folder or in a store)', content: json(ref('Failure')) }, ...storeFailures },
      },
    },
    '/api/admin/bots/{bot_id}/backups/{backup_id}/lock': {
      post: {
        summary: 'Lock a backup: retention and removals leave it (docs/api.md §20; the platform only)',
        parameters: [botIdParameter, backupIdParameter],
        responses: responses(ok('Locked', ref('Backup')), ...backupFailures),
      },
    },
    '/api/admin/bots/{bot_id}/backups/{backup_id}/unlock': {
      post: {
        summary: 'Unlock a backup (docs/api.md §20; the platform only)',
        parameters: [botIdParameter, backupIdParameter],
        responses: responses(ok('Unlocked', ref('Backup')), ...backupFailures),
      },
    },
    '/api/admin/bots/{bot_id}/backups/{backup_id}/restore': {
      post: {
        summary: "Restore a backup into its bot: checked, unpacked and read back first, the bot's data as it was kept as a backup, the bot stopped for the swap and started again if it ran, and judged as a deploy's run is (docs/api.md §20; the platform only)",
        parameters: [botIdParameter, backupIdParameter, ...queryParameters(backupStoreQuery)],
        requestBody: { required: false, content: json(ref('RestoreRequest')) },
        responses: {
          ...responses(ok('Restored', ref('Restored')), ...backupFailures, 413, 415, 500, 503, 507),
          '409': { description: 'A backup, restore or verification of the bot is under way, or its stop or start waited behind another operation', content: json(ref('Failure')) },
          ...storeFailures,
          '422': { description: 'The archive is refused (its checksum, an entry that climbs or links out, a device, a tar bomb), or the bot lacks a folder of the backup: nothing was written; or the bot started again did not stay up min_ready_s within deadline_s: the restore was undone, its data as it was put back', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots/{bot_id}/backups/{backup_id}/verify': {
      post: {
        summary: 'Verify a backup: unpacked into scratch folders and read back, the trees compared; the outcome kept with the backup (docs/api.md §20; the platform only)',
        parameters: [botIdParameter, backupIdParameter, ...queryParameters(backupStoreQuery)],
        responses: {
          ...responses(ok('It reads back whole', ref('Verified')), ...backupFailures, 500, 503),
          '409': { description: 'A backup, restore or verification of the bot is under way', content: json(ref('Failure')) },
          ...storeFailures,
          '422': { description: 'It failed its verification: `msg` says why (kept with the backup, and told as `backup-verify-failed`)', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots/{bot_id}/backups/{backup_id}/archive': {
      get: {
        summary: "One folder of a backup as stored, a gzip-compressed tar, streamed; its SHA-256 in X-Content-SHA256 (docs/api.md §20; the platform only)",
        parameters: [botIdParameter, backupIdParameter, ...queryParameters(backupArchiveQuery)],
        responses: responses({ description: 'The archive', content: { 'application/gzip': { schema: { type: 'string', format: 'binary' } } } }, ...backupFailures),
      },
    },
    '/api/admin/bots/{bot_id}/schedules': {
      get: {
        summary: "The bot's schedules, each with its next due times (docs/api.md §18; the platform only)",
        parameters: [botIdParameter],
        responses: responses(ok('The schedules', ref('Schedules')), ...scheduleFailures),
      },
      post: {
        summary: 'A new schedule: a cron expression, a time zone and a chain of actions (docs/api.md §18; the platform only)',
        parameters: [botIdParameter],
        requestBody: { required: true, content: json(ref('ScheduleRequest')) },
        responses: {
          ...responsesWith('201', ok('Made', ref('Schedule')), ...scheduleFailures, 413, 415),
          '409': { description: `The bot has ${SCHEDULES_PER_BOT} schedules already`, content: json(ref('Failure')) },
          '422': unprocessableSchedule,
        },
      },
    },
    '/api/admin/bots/{bot_id}/schedules/{schedule_id}': {
      get: {
        summary: 'One schedule (docs/api.md §18; the platform only)',
        parameters: [botIdParameter, scheduleIdParameter],
        responses: responses(ok('The schedule', ref('Schedule')), ...scheduleFailures),
      },
      patch: {
        summary: 'Change a schedule: the fields given, the others kept (docs/api.md §18; the platform only)',
        parameters: [botIdParameter, scheduleIdParameter],
        requestBody: { required: true, content: json(ref('ScheduleChange')) },
        responses: { ...responses(ok('Changed', ref('Schedule')), ...scheduleFailures, 413, 415), '422': unprocessableSchedule },
      },
      delete: {
        summary: 'Remove a schedule and its runs (docs/api.md §18; the platform only)',
        parameters: [botIdParameter, scheduleIdParameter],
        responses: responses(ok('Removed'), ...scheduleFailures),
      },
    },
    '/api/admin/bots/{bot_id}/schedules/{schedule_id}/enable': {
      post: {
        summary: 'Turn a schedule on: its due times from now on (docs/api.md §18; the platform only)',
        parameters: [botIdParameter, scheduleIdParameter],
        responses: { ...responses(ok('On', ref('Schedule')), ...scheduleFailures), '422': unprocessableSchedule },
      },
    },
    '/api/admin/bots/{bot_id}/schedules/{schedule_id}/disable': {
      post: {
        summary: 'Turn a schedule off (docs/api.md §18; the platform only)',
        parameters: [botIdParameter, scheduleIdParameter],
        responses: { ...responses(ok('Off', ref('Schedule')), ...scheduleFailures), '422': unprocessableSchedule },
      },
    },
    '/api/admin/bots/{bot_id}/schedules/{schedule_id}/run': {
      post: {
        summary: "Run a schedule's chain now, outside its times (docs/api.md §18; the platform only)",
        parameters: [botIdParameter, scheduleIdParameter],
        responses: {
          ...responsesWith('202', ok('It runs', ref('RunStarted')), ...scheduleFailures),
          '409': { description: 'A run of the schedule is under way', content: json(ref('Failure')) },
        },
      },
    },
    '/api/bots/{bot_id}/schedules/{schedule_id}/runs': {
      get: {
        summary: "A schedule's runs, newest first: due time, start, each action's outcome and output, end (docs/api.md §18; the platform only)",
        parameters: [botIdParameter, scheduleIdParameter, ...queryParameters(runsQuery)],
        responses: responses(ok('The runs', ref('ScheduleRuns')), ...scheduleFailures),
      },
    },
    '/api/admin/bots/{bot_id}/chats': {
      get: {
        summary: "The bot's own chats: which, and the events told; never a URL or token (docs/api.md §16; the platform only)",
        parameters: [botIdParameter],
        responses: responses(ok("The bot's chats", ref('BotChats')), 400, 403, 404, 503),
      },
      put: {
        summary: "Give the bot chats of its own, told beside the agent's; `{}` drops them (docs/api.md §16; the platform only)",
        parameters: [botIdParameter],
        requestBody: { required: true, content: json(ref('BotChatsRequest')) },
        responses: {
          ...responses(ok('Kept', ref('BotChats')), 400, 403, 404, 413, 415, 503),
          '422': { description: 'A chat URL that cannot be used: not readable as a URL, on a host AGENT_NOTIFY_BOT_HOSTS does not name, plain http off loopback, an ntfy URL naming no topic', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots/{bot_id}/chats/test': {
      post: {
        summary: "Send a test message to each of the bot's own chats (docs/api.md §16; the platform only)",
        parameters: [botIdParameter],
        responses: {
          ...responses(ok('Every chat took it', ref('ChatsTested')), 400, 403, 404, 503),
          '409': { description: '`has no chat of its own`', content: json(ref('Failure')) },
          '502': { description: 'A chat did not take it: `msg` names which and why', content: json(ref('Failure')) },
        },
      },
    },
    '/api/admin/bots/{bot_id}/token': {
      post: {
        summary: "A bot's token (Docker), for its PLATFORM_AGENT_TOKEN: it presents it as `Authorization: Bot <token>` (the platform only)",
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        responses: responses(ok('The token', ref('BotToken')), 400, 403, 501),
      },
    },
    '/api/admin/bots/{bot_id}': {
      patch: {
        summary: 'Deploy a new revision of the bot: its image, environment, command, limits or health changed; judged on its uptime and health, rolled back on failure (docs/api.md §15; the platform only)',
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        // No body is `{}`: the same spec deployed again as a fresh run.
        requestBody: { required: false, content: json(ref('DeployRequest')) },
        responses: {
          ...responsesWith('202', ok('The new revision runs and is being judged', ref('Deployed')), 400, 404, 413, 415, 500, 501, 503),
          '403': { description: `${failureText[403]}; or the registry refused the pull's login (docs/api.md §14)`, content: json(ref('Failure')) },
          '409': { description: '`deploy in progress`: another deploy or rollback holds the bot', content: json(ref('Failure')) },
          '422': { description: `${failureText[422]}; or its image (or tag) is not in its registry (docs/api.md §14)`, content: json(ref('Failure')) },
          '502': { description: "The image's registry cannot be reached, or failed the pull (docs/api.md §14)", content: json(ref('Failure')) },
          '504': { description: 'The pull of the image took longer than AGENT_PULL_TIMEOUT_S (docs/api.md §14)', content: json(ref('Failure')) },
        },
      },
      delete: {
        operationId: 'removeBot',
        summary: 'Remove a bot, with its data unless keep_data=true (docs/api.md §19; the platform only)',
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }, ...queryParameters(removeBotQuery)],
        responses: responses(ok('Removed'), 400, 403, 404, 409, 500, 501, 503),
      },
    },
    '/healthz': { get: { summary: 'The process answers', responses: responses(ok('Up')) } },
    '/readyz': { get: { summary: 'The runtime answers too, and the agent is not shutting down', responses: responses(ok('Ready'), 503) } },
    '/metrics': {
      get: {
        summary: 'Prometheus metrics (the one answer that is not JSON)',
        responses: { '200': { description: 'Metrics', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    '/openapi.json': {
      get: {
        summary: 'This document',
        responses: { '200': { description: 'OpenAPI 3.1', content: json({ type: 'object' }) } },
      },
    },
  },
} as const;
