import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { Forbidden, messages } from '../errors.js';
import { isLoopback } from '../loopback.js';
import type { RuntimeDriver } from '../runtime/driver.js';

/** Who is calling: a bot (which may manage only itself) or the platform (which may manage any bot). */
export type Caller = { readonly kind: 'bot'; readonly botId: string } | { readonly kind: 'platform' };

/** What identifies a caller: the socket's source address and the Authorization header, nothing else. */
export interface CallerEvidence {
  readonly address: string | undefined;
  readonly authorization: string | undefined;
}

/** The address as the runtime reports it: IPv4-mapped IPv6 (`::ffff:10.0.0.2`) becomes plain IPv4. */
export function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function holdsAdminToken(authorization: string | undefined, adminToken: string | undefined): boolean {
  if (adminToken === undefined || authorization === undefined) return false;
  const given = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
  // Digests have one length, so the comparison takes the same time whatever was sent.
  return given !== undefined && timingSafeEqual(digest(given), digest(adminToken));
}

/**
 * Classifies a caller (CONTRACT.md §4): an address held by a bot is that bot,
 * whatever else the request says; then loopback or the admin token is the
 * platform; anyone else is refused with Forbidden.
 */
export async function identifyCaller(
  evidence: CallerEvidence,
  driver: RuntimeDriver,
  adminToken: string | undefined,
): Promise<Caller> {
  const address = evidence.address === undefined ? undefined : plainAddress(evidence.address);
  const botId = address === undefined ? undefined : await driver.botAtAddress(address);
  if (botId !== undefined) return { kind: 'bot', botId };
  if (address !== undefined && isLoopback(address)) return { kind: 'platform' };
  if (holdsAdminToken(evidence.authorization, adminToken)) return { kind: 'platform' };
  throw new Forbidden(messages.stranger);
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
export async function callerOf(ctx: Context, driver: RuntimeDriver, adminToken: string | undefined): Promise<Caller> {
  const caller = await identifyCaller(
    { address: ctx.req.socket.remoteAddress, authorization: ctx.get('authorization') || undefined },
    driver,
    adminToken,
  );
  ctx.state.caller = caller.kind === 'bot' ? `bot:${caller.botId}` : 'platform';
  return caller;
}
