import { number, object, ObjectSchema, string, ValidationError } from 'yup';
import type { Schema } from 'yup';
import { BadRequest } from '../errors.js';
import { BOT_ID_MAX_LENGTH, BOT_ID_PATTERN } from '../runtime/labels.js';

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

/** Body of logs; `lines` defaults to DEFAULT_LOG_LINES. */
export const logsRequest = object({
  bot_id: botIdSchema('bot_id'),
  lines: number()
    .strict()
    .typeError('lines must be a whole number from 1 to 10000')
    .integer('lines must be a whole number from 1 to 10000')
    .min(1, 'lines must be a whole number from 1 to 10000')
    .max(10_000, 'lines must be a whole number from 1 to 10000'),
}).typeError(jsonObject);

/** The X-Bot-ID header of self restart; absent is allowed. */
export const selfRestartHeader = botIdSchema('X-Bot-ID').optional();

/** The bot id in a path. */
export const pathBotId = botIdSchema('bot id in the path');

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
    if (err instanceof ValidationError) throw new BadRequest(err.errors.join('; '));
    throw err;
  }
}
