import { array, boolean, lazy, mixed, object, ObjectSchema, string, ValidationError } from 'yup';
import type { Schema } from 'yup';
import { Unprocessable } from '../errors.js';
import { ACTION_TYPES, ACTIONS_PER_SCHEDULE, COMMAND_TIMEOUT_DEFAULT_S, COMMAND_TIMEOUT_MAX_S, cronOf, OFFSET_MAX_S, STARTING_DEADLINE_DEFAULT_S, STARTING_DEADLINE_MAX_S } from '../schedules/schedule-spec.js';
import type { ActionType, ScheduleAction, ScheduleSpec } from '../schedules/schedule-spec.js';
import { wholeNumber } from '../whole-number.js';
import type { RetentionPolicy } from '../backups/retention.js';
import type { BackupMode } from '../backups/backup-folder.js';
import { backupHowFields, backupStoreQuery, backupStores, commandArgs, deployRequest, preMatchesMode, retentionPolicy } from './schemas.js';
import { PRE_TIMEOUT_DEFAULT_S } from '../backups/backups.js';

// What a schedule's body must be (docs/api.md §18): a 422 naming the field for anything else.

const IANA_ZONES = new Set(Intl.supportedValuesOf('timeZone'));

/** The zone's name if the platform's Intl knows it (IANA names; UTC); undefined otherwise. */
function knownZone(zone: string): boolean {
  if (zone === 'UTC' || IANA_ZONES.has(zone)) return true;
  try {
    // Links (Asia/Calcutta, US/Eastern) that supportedValuesOf leaves out are still IANA names.
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone !== undefined && /^[A-Za-z_]+(\/[A-Za-z0-9_+-]+)*$/.test(zone);
  } catch {
    return false;
  }
}

/** Why `cron` is no five-field expression croner takes; undefined when it is one. */
function cronFault(cron: string): string | undefined {
  if (!/^@(yearly|annually|monthly|weekly|daily|hourly)$/.test(cron.trim()) && cron.trim().split(/\s+/).length !== 5) {
    return 'cron must have five fields (minute hour day-of-month month day-of-week) or be @hourly, @daily, @weekly, @monthly or @yearly';
  }
  try {
    cronOf(cron, 'UTC');
    return undefined;
  } catch (err) {
    return `cron is not a valid expression: ${(err as Error).message.slice(0, 200)}`;
  }
}

const offset = wholeNumber('offset_s', 0, OFFSET_MAX_S).strict();
const goesOn = boolean().strict().typeError('continue_on_failure must be true or false');
const plainAction = (type: ActionType) => object({ type: string().strict().oneOf([type]), offset_s: offset, continue_on_failure: goesOn });

const actionSchemas: Record<ActionType, ObjectSchema<object>> = {
  restart: plainAction('restart'),
  stop: plainAction('stop'),
  start: plainAction('start'),
  backup: plainAction('backup')
    .shape({ ...backupHowFields(), keep: retentionPolicy('keep'), stores: backupStores() })
    .test('pre', preMatchesMode),
  verify: plainAction('verify').shape({ store: backupStoreQuery.fields.store }),
  deploy: plainAction('deploy').shape({ deploy: deployRequest.required('deploy is required: the PATCH body it deploys (docs/api.md §15)') }),
  command: plainAction('command').shape({
    command: commandArgs('command', 'command is required: the argument list to run in the bot, e.g. ["sh", "-c", "echo hi"]'),
    timeout_s: wholeNumber('timeout_s', 1, COMMAND_TIMEOUT_MAX_S).strict(),
  }),
};

const typeMessage = `type must be one of ${ACTION_TYPES.join(', ')}`;
const actionSchema = lazy((value: unknown) => {
  const type = (value as { type?: unknown } | null)?.type;
  return typeof type === 'string' && Object.hasOwn(actionSchemas, type)
    ? actionSchemas[type as ActionType]
    : object({ type: mixed().test('type', typeMessage, () => false) }).typeError('each action must be a JSON object');
});

const fields = {
  name: string().strict().typeError('name must be a string').max(100, 'name must be at most 100 characters').nullable(),
  cron: string()
    .strict()
    .typeError('cron must be a string')
    .max(200, 'cron must be at most 200 characters')
    .test('cron', (value, context) => {
      const fault = value === undefined ? undefined : cronFault(value);
      return fault === undefined || context.createError({ message: fault });
    }),
  time_zone: string()
    .strict()
    .typeError('time_zone must be a string')
    .max(64, 'time_zone must be at most 64 characters')
    .test('zone', 'time_zone must be an IANA time zone, e.g. Europe/Berlin or UTC', (value) => value === undefined || knownZone(value)),
  enabled: boolean().strict().typeError('enabled must be true or false'),
  only_when_running: boolean().strict().typeError('only_when_running must be true or false'),
  missed: string().strict().typeError('missed must be skip or run-once').oneOf(['skip', 'run-once'], 'missed must be skip or run-once'),
  starting_deadline_s: wholeNumber('starting_deadline_s', 1, STARTING_DEADLINE_MAX_S).strict(),
  actions: array(actionSchema)
    .strict()
    .typeError('actions must be a list of actions')
    .min(1, 'actions must hold at least one action')
    .max(ACTIONS_PER_SCHEDULE, `actions must hold at most ${ACTIONS_PER_SCHEDULE} actions`),
};

/** A new schedule's body: `cron` and `actions` are required. */
export const scheduleRequest = object({ ...fields, cron: fields.cron.required('cron is required'), actions: fields.actions.required('actions is required') }).typeError('request body must be a JSON object');
/** A change's body: any of the fields, at least one, the others kept. */
export const scheduleChange = object(fields)
  .typeError('request body must be a JSON object')
  .test('a-field', `a change names at least one of ${Object.keys(fields).join(', ')}`, (value) => value === undefined || Object.keys(value).length > 0);

/** The fields of `value` (and of the objects within it) that `schema` does not know, as paths. */
function unknownFields(schema: Schema | undefined, value: unknown, at: string): string[] {
  if (typeof value !== 'object' || value === null || schema === undefined) return [];
  // A lazy schema (an action, by its type) resolves to the one for this value; any other to itself.
  const resolved = (schema as unknown as { resolve(options: { value: unknown }): Schema }).resolve({ value });
  if (Array.isArray(value)) {
    const inner = (resolved as { innerType?: Schema }).innerType;
    return value.flatMap((item, index) => unknownFields(inner, item, `${at}[${index}]`));
  }
  if (!(resolved instanceof ObjectSchema)) return [];
  const known = resolved.fields as Record<string, Schema>;
  const path = (key: string) => (at === '' ? key : `${at}.${key}`);
  return Object.keys(value).flatMap((key) => (Object.hasOwn(known, key) ? unknownFields(known[key], (value as Record<string, unknown>)[key], path(key)) : [path(key)]));
}

type Output<S extends Schema> = S['__outputType'];

/** `value` checked against `schema`: an unknown field, a bad expression, zone or bound is a 422 that names the field (docs/api.md §18). */
export function validSchedule<S extends typeof scheduleRequest | typeof scheduleChange>(schema: S, value: unknown): Output<S> {
  const unknown = typeof value === 'object' && value !== null && !Array.isArray(value) ? unknownFields(schema, value, '') : [];
  if (unknown.length > 0) throw new Unprocessable(`unknown field ${unknown.slice(0, 5).map((name) => JSON.stringify(name.slice(0, 64))).join(', ')}: a schedule has ${Object.keys(fields).join(', ')} (docs/api.md §18)`);
  try {
    return schema.validateSync(value, { abortEarly: false }) as Output<S>;
  } catch (err) {
    if (err instanceof ValidationError) {
      const faults = err.inner.length > 0 ? err.inner.map((inner) => fieldOf(inner.path, inner.message)) : [fieldOf(err.path, err.message)];
      throw new Unprocessable([...new Set(faults)].join('; '));
    }
    throw err;
  }
}

/** A message with the whole path of the field it is about: `offset_s must be ...` at `actions[1].offset_s` says so. */
function fieldOf(path: string | undefined, message: string): string {
  if (path === undefined || path === '') return message;
  const parent = path.slice(0, path.lastIndexOf('.') + 1);
  const leaf = path.slice(parent.length).replace(/\[\d+\]$/, '');
  return message.startsWith(leaf) ? `${parent}${message}` : `${path}: ${message}`;
}

/** A new schedule's spec, with the defaults of what its body left out. */
export function specOf(body: Output<typeof scheduleRequest>): ScheduleSpec {
  return {
    name: body.name ?? null,
    cron: body.cron.trim(),
    time_zone: body.time_zone ?? 'UTC',
    enabled: body.enabled ?? true,
    only_when_running: body.only_when_running ?? false,
    missed: (body.missed as ScheduleSpec['missed'] | undefined) ?? 'skip',
    starting_deadline_s: body.starting_deadline_s ?? STARTING_DEADLINE_DEFAULT_S,
    actions: body.actions.map(actionOf),
  };
}

/** A spec with a change's fields put over it. */
export function changedSpec(spec: ScheduleSpec, change: Output<typeof scheduleChange>): ScheduleSpec {
  return specOf({
    ...spec,
    ...Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)),
    actions: (change.actions ?? spec.actions) as Output<typeof scheduleRequest>['actions'],
  } as Output<typeof scheduleRequest>);
}

function actionOf(action: Record<string, unknown>): ScheduleAction {
  const type = action.type as ActionType;
  return {
    type,
    offset_s: (action.offset_s as number | undefined) ?? 0,
    continue_on_failure: (action.continue_on_failure as boolean | undefined) ?? false,
    ...(type === 'deploy' ? { deploy: action.deploy as Readonly<Record<string, unknown>> } : {}),
    ...(type === 'command' ? { command: action.command as string[], timeout_s: (action.timeout_s as number | undefined) ?? COMMAND_TIMEOUT_DEFAULT_S } : {}),
    ...(type === 'backup'
      ? {
          mode: (action.mode as BackupMode | undefined) ?? 'stop',
          ...(action.pre ? { pre: action.pre as string[], pre_timeout_s: (action.pre_timeout_s as number | undefined) ?? PRE_TIMEOUT_DEFAULT_S } : {}),
          ...(action.keep ? { keep: action.keep as RetentionPolicy } : {}),
          ...(action.stores ? { stores: action.stores as string[] } : {}),
        }
      : {}),
    ...(type === 'verify' && action.store !== undefined ? { store: action.store as string } : {}),
  };
}

