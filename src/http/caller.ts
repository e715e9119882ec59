import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { Forbidden, messages } from '../errors.js';
import { isHostItself } from '../loopback.js';
import type { Identity } from '../config.js';
import { BadBotToken } from '../identity/bot-tokens.js';
import type { BotTokenVerifier } from '../identity/bot-tokens.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { isCrossSite } from './cross-site.js';
import type { RequestOrigin } from './cross-site.js';
import { SESSION_COOKIE } from './console-session.js';
import type { ConsoleSessions } from './console-session.js';

/** Who is calling: a bot (which may manage only itself) or the platform (which may manage any bot). */
export type Caller = { readonly kind: 'bot'; readonly botId: string } | { readonly kind: 'platform' };

/**
 * What identifies a caller: the socket's source address and the Authorization header, nothing else;
 * for a loopback caller also what tells a web page's request apart (RequestOrigin).
 */
export interface CallerEvidence extends Partial<RequestOrigin> {
  readonly address: string | undefined;
  readonly authorization: string | undefined;
  /** Whether the request carries a console session the agent signed, unexpired and not ended. */
  readonly session?: boolean;
}

/** Who counts as the platform besides loopback: the admin token's holder; and the further names loopback callers may use. */
export interface PlatformPolicy {
  readonly adminToken: string | undefined;
  readonly trustedHosts: readonly string[];
  /** Whether the host itself (127.0.0.1, ::1) is the platform; off where only the token should be. */
  readonly loopbackPlatform: boolean;
  /** Checks the console's session cookies; none: no session counts. */
  readonly sessions?: ConsoleSessions | undefined;
  /** What names a bot (AGENT_IDENTITY); `address` when not said. */
  readonly identity?: Identity;
  /** Verifies the tokens bots present (`Authorization: Bot <token>`); none: no token names a bot. */
  readonly botTokens?: BotTokenVerifier | undefined;
  /** Whether an address is a proxy's hop (hops.ts), behind which many bots share it; none: no address is. */
  readonly isHop?: (address: string) => boolean;
  /** The key the fleet's agents pass calls on with (AGENT_FLEET_KEY, `Authorization: Fleet <key>`); none: no call is taken so. */
  readonly fleetKey?: string | undefined;
}

/** The address as the runtime reports it: IPv4-mapped IPv6 (`::ffff:10.0.0.2`) becomes plain IPv4. */
export function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The credentials an Authorization header carries under `scheme` (`Bearer`, `Bot`, `Fleet`), else undefined. */
function credentialsOf(authorization: string | undefined, scheme: 'Bearer' | 'Bot' | 'Fleet'): string | undefined {
  const [given, credentials] = /^(\S+)\s+(\S+)\s*$/.exec(authorization ?? '')?.slice(1) ?? [];
  return given?.toLowerCase() === scheme.toLowerCase() ? credentials : undefined;
}

function holdsAdminToken(authorization: string | undefined, adminToken: string | undefined): boolean {
  const given = credentialsOf(authorization, 'Bearer');
  // Digests have one length, so the comparison takes the same time whatever was sent.
  return adminToken !== undefined && given !== undefined && timingSafeEqual(digest(given), digest(adminToken));
}

/**
 * Classifies a caller (docs/api.md §4): a bot, by the address it calls from,
 * by its token (`Authorization: Bot`), or by both agreeing, as AGENT_IDENTITY
 * says (a bad token is Forbidden, saying why; a request with a token is never
 * the platform); then the admin token's holder is the platform, and so is a
 * console session's holder, or the host itself (127.0.0.1, ::1; not a proxy's
 * hop from elsewhere in 127/8) while AGENT_LOOPBACK_PLATFORM is on, unless a
 * web page of another site could have sent the request (a session then counts
 * for nothing; loopback is Forbidden, cross-site); anyone else is refused with
 * Forbidden.
 */
export async function identifyCaller(evidence: CallerEvidence, driver: RuntimeDriver, policy: PlatformPolicy): Promise<Caller> {
  const identity = policy.identity ?? 'address';
  const address = evidence.address === undefined ? undefined : plainAddress(evidence.address);
  const botToken = credentialsOf(evidence.authorization, 'Bot');
  // Behind a hop the address names no one: what a token costs is counted by what it claims.
  const countedAt = address !== undefined && policy.isHop?.(address) ? undefined : address;
  const tokenBot = identity === 'address' || botToken === undefined ? undefined : await claimedBot(botToken, countedAt, policy.botTokens);
  if (identity === 'token' && tokenBot !== undefined) return { kind: 'bot', botId: tokenBot };
  const botId = identity === 'token' || address === undefined ? undefined : await driver.botAtAddress(address);
  if (identity === 'address+token') {
    if (botId !== undefined && tokenBot === undefined) throw new Forbidden(messages.botTokenRequired);
    if (tokenBot !== undefined && botId !== tokenBot) throw new Forbidden(botId === undefined ? messages.botTokenAway : messages.botTokenOtherBot);
  }
  if (botId !== undefined) return { kind: 'bot', botId };
  // A bot's token never makes its holder the platform, whatever else the request says.
  if (botToken !== undefined) throw new Forbidden(messages.stranger);
  if (holdsAdminToken(evidence.authorization, policy.adminToken)) return { kind: 'platform' };
  // A call another agent of the fleet passed on (docs/api.md §17) is the platform's: only the platform's calls are.
  const fleetKey = credentialsOf(evidence.authorization, 'Fleet');
  if (fleetKey !== undefined) {
    if (policy.fleetKey !== undefined && timingSafeEqual(digest(fleetKey), digest(policy.fleetKey))) return { kind: 'platform' };
    throw new Forbidden(messages.notTheFleet);
  }
  const crossSite = isCrossSite({ host: evidence.host, origin: evidence.origin, fetchSite: evidence.fetchSite }, policy.trustedHosts);
  if (evidence.session === true && !crossSite) return { kind: 'platform' };
  // A hop (under token identity, loopback itself) hands over every bot's connections: it is never the platform.
  if (address !== undefined && policy.loopbackPlatform && isHostItself(address) && policy.isHop?.(address) !== true) {
    if (crossSite) throw new Forbidden(messages.crossSite);
    return { kind: 'platform' };
  }
  throw new Forbidden(messages.stranger);
}

/** The bot a token names; Forbidden, saying why, when it names none. */
async function claimedBot(token: string, address: string | undefined, tokens: BotTokenVerifier | undefined): Promise<string> {
  if (!tokens) throw new Forbidden(messages.botTokensOff);
  try {
    return await tokens.botNamed(token, address);
  } catch (err) {
    if (err instanceof BadBotToken) throw new Forbidden(err.message);
    throw err;
  }
}

/** Throws Forbidden when a bot names another bot. */
export function authorize(caller: Caller, botId: string): void {
  if (caller.kind === 'bot' && caller.botId !== botId) throw new Forbidden(messages.otherBot);
}

/** True when the caller is the bot it names, and so would not outlive its own restart or stop. */
export function isSelf(caller: Caller, botId: string): boolean {
  return caller.kind === 'bot' && caller.botId === botId;
}

/** The caller of a request, from its connection and Authorization header; recorded on the context for the request log. */
export async function callerOf(ctx: Context, driver: RuntimeDriver, policy: PlatformPolicy): Promise<Caller> {
  const headers = ctx.req.headers;
  // koa's cookie jar is made on first use: a request without a Cookie header (every bot's) never needs one.
  const session = headers.cookie !== undefined && policy.sessions !== undefined && (await policy.sessions.current(ctx.cookies.get(SESSION_COOKIE)));
  const caller = await identifyCaller(
    {
      address: ctx.req.socket.remoteAddress,
      authorization: headers.authorization,
      host: headers.host,
      origin: headers.origin,
      fetchSite: headerValue(headers['sec-fetch-site']),
      session,
    },
    driver,
    policy,
  );
  ctx.state.caller = caller;
  return caller;
}

/** The caller as log lines name it: `bot:<id>` or `platform`. */
export function callerLabel(caller: Caller | undefined): string | undefined {
  if (caller === undefined) return undefined;
  return caller.kind === 'bot' ? `bot:${caller.botId}` : 'platform';
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
