/**
 * The closed set of failures the agent reports to callers. Drivers translate
 * native errors into these at their edge; one middleware maps them to HTTP.
 */
export abstract class AgentError extends Error {
  abstract readonly status: number;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Input is malformed: not JSON, a missing or ill-typed field, a bad bot id. */
export class BadRequest extends AgentError {
  readonly status = 400;
}

/** The caller may not do this. */
export class Forbidden extends AgentError {
  readonly status = 403;
}

/** The bot (or route) does not exist. */
export class NotFound extends AgentError {
  readonly status = 404;
}

/** The bot exists but must be running for this operation. */
export class NotRunning extends AgentError {
  readonly status = 409;
}

/** The engine refused because the bot's container is in the middle of something (being removed, renamed, restarted). */
export class EngineBusy extends AgentError {
  readonly status = 409;
}

/** A bot with this id exists already. */
export class AlreadyExists extends AgentError {
  readonly status = 409;
}

/** Another lifecycle operation on the bot held this one back too long; it was dropped. */
export class OperationInProgress extends AgentError {
  readonly status = 409;
}

/**
 * A well-formed request the runtime cannot carry out as asked: an image it
 * does not hold, more CPUs than the host has. Never malformed input (400).
 */
export class Unprocessable extends AgentError {
  readonly status = 422;
}

/** A pull's image (or its tag) is not in its registry (docs/api.md §14). */
export class ImageNotFound extends Unprocessable {}

/** The registry refused a pull's credentials, or wants some and none were given (docs/api.md §14). */
export class RegistryRefused extends AgentError {
  readonly status = 403;
}

/** The registry of a pull's image cannot be reached, or failed the pull (docs/api.md §14). */
export class RegistryUnreachable extends AgentError {
  readonly status = 502;
}

/** A chat test on an agent with no chat configured (docs/api.md §16). */
export class NoChat extends AgentError {
  readonly status = 409;
}

/** A backup store (S3) refused, failed or did not answer (docs/api.md §20). */
export class StoreFailed extends AgentError {
  readonly status = 502;
}

/** A chat's service did not take a test message (docs/api.md §16). */
export class ChatUnreachable extends AgentError {
  readonly status = 502;
}

/** A pull outlasted AGENT_PULL_TIMEOUT_S; it was abandoned (docs/api.md §14). */
export class PullTooSlow extends AgentError {
  readonly status = 504;
}

/** The request body is larger than the agent accepts. */
export class PayloadTooLarge extends AgentError {
  readonly status = 413;
}

/** The request body is not JSON and says it is something else. */
export class UnsupportedMediaType extends AgentError {
  readonly status = 415;
}

/** Too many lifecycle operations on one bot; `retryAfterS` says when to try again. */
export class TooManyRequests extends AgentError {
  readonly status = 429;

  constructor(
    message: string,
    readonly retryAfterS: number,
  ) {
    super(message);
  }
}

/** A lifecycle operation failed in the runtime for a reason not listed above. */
export class OperationFailed extends AgentError {
  readonly status = 500;
}

/** The runtime in use does not offer this. */
export class NotImplemented extends AgentError {
  readonly status = 501;
}

/** The disk a backup is written to is full (docs/api.md §20). */
export class StorageFull extends AgentError {
  readonly status = 507;
}

/** The container runtime (dockerd, API server) cannot be reached. */
export class RuntimeUnavailable extends AgentError {
  readonly status = 503;
}

/** The node that holds the bot does not answer (docs/api.md §17): its agent is away, or its call failed. */
export class NodeAway extends AgentError {
  readonly status = 503;
}

/** Another node's agent refused what this one asked of it: its status and its words, passed on (docs/api.md §17). */
export class RefusedByNode extends AgentError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The history's store (its database) does not answer: reads of records and events wait for it. */
export class HistoryUnavailable extends AgentError {
  readonly status = 503;
}

/** The agent received SIGTERM: `/readyz` says so while it still answers, so that calls go elsewhere first. */
export class ShuttingDown extends AgentError {
  readonly status = 503;
}

/** A restart outlasted the restart time-out; it still runs to its end. */
export class RestartTimeout extends AgentError {
  readonly status = 504;
}

/**
 * What lies behind an error, for the log: the messages of its `cause` chain
 * (e.g. `connect ENOENT /var/run/docker.sock`), outermost first; undefined
 * when it has none. Never sent to a caller.
 */
export function causeOf(err: unknown): string | undefined {
  const causes: string[] = [];
  let cause = (err as { cause?: unknown } | null | undefined)?.cause;
  for (let depth = 0; depth < 5 && cause !== undefined && cause !== null; depth += 1) {
    causes.push(cause instanceof Error ? cause.message : String(cause));
    cause = (cause as { cause?: unknown }).cause;
  }
  return causes.length > 0 ? causes.join(': ') : undefined;
}

/** Texts fixed by the contract, so that bots can match on them. */
export const messages = {
  botNotFound: (botId: string) => `container not found: no bot ${botId}`,
  notRunning: (botId: string) =>
    `container not found or not running: bot ${botId} is stopped, and it must be running for this operation`,
  otherBot: 'a bot may manage only itself',
  hopConnections: (botId: string) => `too many connections: bot ${botId} holds its share of the proxy's connections to the agent already (docs/api.md §2)`,
  notOwner: (botId: string) => `user_id does not own bot ${botId}`,
  stranger: 'forbidden: the caller is neither a bot, nor the platform (loopback or admin token)',
  crossSite:
    'forbidden: cross-site request: a loopback caller must name loopback (or AGENT_TRUSTED_HOSTS) in Host, with no Origin of another site and no Sec-Fetch-Site cross-site or same-site',
  platformOnly: 'forbidden: only the platform (loopback or admin token) may create, list or remove bots',
  platformOnlyNodes: "forbidden: only the platform (loopback or admin token) may list or drain the fleet's nodes",
  notTheFleet: "forbidden: this fleet key is not this fleet's (AGENT_FLEET_KEY)",
  fleetOnly: "forbidden: only another agent of the fleet (Authorization: Fleet) makes here a bot it moves; the platform moves bots with POST /api/admin/bots/{bot_id}/move",
  provisioningOff: 'forbidden: provisioning is off on this agent (AGENT_PROVISIONING=off): bots are created and removed elsewhere',
  platformOnlyNotifications: 'forbidden: only the platform (loopback or admin token) may send a test message to the chats',
  platformOnlySchedules: "forbidden: only the platform (loopback or admin token) may read or change a bot's schedules",
  platformOnlyLogs: "forbidden: only the platform (loopback or admin token) may search every bot's log history",
  platformOnlyAlerts: 'forbidden: only the platform (loopback or admin token) may make, read or remove alert rules',
  platformOnlyBackups: "forbidden: only the platform (loopback or admin token) may make, read or remove a bot's backups",
  platformOnlyChats: "forbidden: only the platform (loopback or admin token) may set, read or test a bot's chats",
  platformOnlyEvents: "forbidden: only the platform (loopback or admin token) may read every bot's events; a bot reads its own at /api/bots/{bot_id}/events",
  consoleForBots: "forbidden: the console is the platform's; a bot may manage only itself, through the API",
  heartbeatBotOnly: 'forbidden: only a bot may send its own heartbeat (the platform has no heartbeat to send)',
  platformOnlyConsole: 'forbidden: only the platform (loopback, admin token or console session) may read this',
  noSessions: 'forbidden: console sessions need AGENT_ADMIN_TOKEN to be set; on loopback the console needs none',
  wrongToken: 'forbidden: that is not the admin token',
  botTokenRequired: 'forbidden: this agent names a bot by its address and its token: send Authorization: Bot <PLATFORM_AGENT_TOKEN>',
  botTokenOtherBot: 'forbidden: the bot token names another bot than the address it comes from',
  botTokenAway: 'forbidden: the bot token comes from an address no bot holds, and this agent wants both to agree',
  botTokensOff: 'forbidden: this agent verifies no bot tokens on its runtime',
  noSelfId: 'bot identifier not found; pass it in the X-Bot-ID header',
  restartTimeout: (botId: string, ms: number) =>
    `timeout during restart of bot ${botId} after ${ms} ms; the restart goes on, retry later or raise your time-out`,
  shuttingDown: 'shutting down: this agent stops; it answers calls a little longer, while new ones go elsewhere',
  runtimeUnavailable: (runtime: string) => `runtime unavailable: cannot reach the ${runtime} runtime`,
  restartFailed: (botId: string, detail: string) => `Failed to restart bot ${botId}: ${detail}`,
  deployInProgress: (botId: string) => `deploy in progress: bot ${botId} is being deployed or rolled back; retry once it ends (docs/api.md §15)`,
  inProgress: (operation: string, botId: string, waitedMs: number) =>
    `${operation} in progress: bot ${botId} was still busy with it after ${waitedMs} ms, so this operation was dropped; retry later`,
} as const;
