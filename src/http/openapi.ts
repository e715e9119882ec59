import { BOT_ID_MAX_LENGTH, BOT_ID_PATTERN } from '../runtime/labels.js';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

/** What each error status means, as CONTRACT.md §3 states it. */
const failureText: Record<number, string> = {
  400: 'Malformed input: not JSON, a missing or ill-typed field, a bad bot id or `lines`; `msg` names the field',
  403: 'A bot naming another bot, a `user_id` that is not the owner, or a caller that is neither a bot, loopback nor holds the admin token',
  404: '`container not found`: no such bot',
  405: 'Method not allowed on this path',
  409: '`container not found ... must be running`: the bot is stopped',
  413: 'Body larger than 16 KiB',
  415: 'Body not JSON and declared as another type',
  429: 'Too many lifecycle operations on this bot, or (a bot reading itself) too many reads; see Retry-After',
  500: 'The runtime refused the operation (`Failed to restart bot ...`), or the agent lacks a permission',
  501: 'The runtime in use does not offer this',
  503: '`runtime unavailable`: the container runtime cannot be reached',
  504: '`timeout during restart`: the restart goes on',
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

const ok = (description: string, schema = ref('Message')) => ({ description, content: json(schema) });
const lifecycleFailures = [400, 403, 404, 413, 415, 429, 500, 503];
const readFailures = [400, 403, 404, 413, 415, 429, 500, 503];

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
      BotId: {
        type: 'string',
        pattern: BOT_ID_PATTERN.source,
        maxLength: BOT_ID_MAX_LENGTH,
        examples: ['bot_12_34_abc'],
      },
      OwnerRequest: {
        type: 'object',
        required: ['bot_id', 'user_id'],
        properties: { bot_id: ref('BotId'), user_id: { type: 'string', maxLength: 256 } },
      },
      LogsRequest: {
        type: 'object',
        required: ['bot_id'],
        properties: { bot_id: ref('BotId'), lines: { type: 'integer', minimum: 1, maximum: 10000, default: 100 } },
      },
      Message: {
        type: 'object',
        required: ['ok', 'message'],
        properties: { ok: { const: true }, message: { type: 'string' } },
        additionalProperties: false,
      },
      Logs: {
        type: 'object',
        required: ['ok', 'logs'],
        properties: { ok: { const: true }, logs: { type: 'string' } },
        additionalProperties: false,
      },
      Stats: {
        type: 'object',
        required: ['ok', 'stats'],
        additionalProperties: false,
        properties: {
          ok: { const: true },
          stats: {
            type: 'object',
            required: ['cpu_percent', 'memory_usage', 'memory_percent', 'uptime'],
            additionalProperties: false,
            properties: {
              cpu_percent: { type: 'number', minimum: 0 },
              memory_usage: { type: 'string', pattern: '^\\d+\\.\\d\\d MB$' },
              memory_percent: { type: 'number', minimum: 0 },
              uptime: { type: 'string', pattern: '^\\d+h \\d+m$' },
            },
          },
        },
      },
      CreateBotRequest: {
        type: 'object',
        required: ['bot_id', 'user_id', 'image', 'template', 'token'],
        properties: {
          bot_id: ref('BotId'),
          user_id: { type: 'string', maxLength: 256 },
          image: { type: 'string', examples: ['registry.example.com/my-bot:1'] },
          template: { type: 'string', examples: ['telegram', 'discord', 'n8n'] },
          token: { type: 'string', description: 'Set as BOT_TOKEN and every alias; never answered back nor logged' },
          domain: { type: 'string' },
          port: { type: 'integer', minimum: 1, maximum: 65535, default: 8080 },
          env: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: 100 },
          memory_limit: { type: 'integer', minimum: 6291456, description: 'bytes' },
          cpu_limit: { type: 'number', exclusiveMinimum: 0, description: 'CPUs' },
          command: { type: 'array', items: { type: 'string' }, minItems: 1 },
        },
      },
      BotList: {
        type: 'object',
        required: ['ok', 'bots'],
        additionalProperties: false,
        properties: {
          ok: { const: true },
          bots: {
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
              },
            },
          },
        },
      },
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
        parameters: [{ name: 'X-Bot-ID', in: 'header', required: false, schema: ref('BotId') }],
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
        summary: 'Restart a bot; answers once it runs again',
        requestBody: { required: true, content: json(ref('OwnerRequest')) },
        responses: responses(ok('Restarted'), ...lifecycleFailures, 409, 504),
      },
    },
    '/api/bots/stop': {
      post: {
        summary: 'Stop a bot (idempotent)',
        requestBody: { required: true, content: json(ref('OwnerRequest')) },
        responses: responses(ok('Stopped, or already stopped'), ...lifecycleFailures),
      },
    },
    '/api/bots/start': {
      post: {
        summary: 'Start a bot (idempotent)',
        requestBody: { required: true, content: json(ref('OwnerRequest')) },
        responses: responses(ok('Started, or already running'), ...lifecycleFailures),
      },
    },
    '/api/bots/logs': {
      post: {
        summary: "The last `lines` lines of a bot's stdout and stderr, at most 4 MiB (the newest whole lines)",
        requestBody: { required: true, content: json(ref('LogsRequest')) },
        responses: responses(ok('The log text', ref('Logs')), ...readFailures),
      },
    },
    '/api/bots/{bot_id}/logs': {
      get: {
        summary: "The last `lines` lines of a bot's stdout and stderr (as POST /api/bots/logs)",
        parameters: [
          { name: 'bot_id', in: 'path', required: true, schema: ref('BotId') },
          { name: 'lines', in: 'query', required: false, schema: { type: 'integer', minimum: 0, maximum: 10000, default: 100 } },
          { name: 'follow', in: 'query', required: false, schema: { enum: ['true', 'false'] } },
        ],
        responses: responses(ok('The log text', ref('Logs')), 400, 403, 404, 429, 500, 501, 503),
      },
    },
    '/api/bots/{bot_id}/stats': {
      get: {
        summary: "A running bot's CPU, memory and uptime",
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        responses: responses(ok('The stats', ref('Stats')), 400, 403, 404, 409, 429, 500, 503),
      },
    },
    '/api/admin/bots': {
      post: {
        summary: 'Create and start a bot with the full bot environment (the platform only)',
        requestBody: { required: true, content: json(ref('CreateBotRequest')) },
        responses: {
          ...responsesWith('201', ok('Created and started'), 400, 403, 413, 415, 500, 501, 503),
          '409': { description: 'A bot with this id exists', content: json(ref('Failure')) },
        },
      },
      get: {
        summary: 'Every bot, or those of `user_id` (the platform only)',
        parameters: [{ name: 'user_id', in: 'query', required: false, schema: { type: 'string' } }],
        responses: responses(ok('The bots', ref('BotList')), 400, 403, 500, 501, 503),
      },
    },
    '/api/admin/bots/{bot_id}': {
      delete: {
        summary: 'Remove a bot (the platform only)',
        parameters: [{ name: 'bot_id', in: 'path', required: true, schema: ref('BotId') }],
        responses: responses(ok('Removed'), 400, 403, 404, 500, 501, 503),
      },
    },
    '/healthz': { get: { summary: 'The process answers', responses: responses(ok('Up')) } },
    '/readyz': { get: { summary: 'The runtime answers too', responses: responses(ok('Ready'), 503) } },
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
