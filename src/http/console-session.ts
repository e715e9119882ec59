import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** The cookie that carries a console session. */
export const SESSION_COOKIE = 'bot_agent_session';
/** How long a session lasts (docs/api.md §12). */
export const SESSION_MS = 12 * 60 * 60 * 1000;

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
const nonceOf = (value: string): string => value.split('.')[1] ?? '';

/** Where ended sessions are kept for every agent sharing one store (the history's). */
export interface SharedSessionEnds {
  end(nonce: string, untilMs: number): Promise<void>;
  ended(nonce: string): Promise<boolean>;
}

/**
 * Console sessions (docs/api.md §12): the admin token, typed once, buys a
 * cookie `<expiry>.<nonce>.<HMAC>` signed with a key derived from that token.
 * Every agent that holds the same token checks it without shared state, and a
 * new token ends every session. An ended session is refused by this agent
 * at once, and by every agent sharing its store (`shared`) within seconds,
 * until it would have expired.
 */
export class ConsoleSessions {
  private readonly key: Buffer | undefined;
  /** Sessions ended before their expiry, by value, with that expiry. */
  private readonly ended = new Map<string, number>();

  constructor(
    private readonly adminToken: string | undefined,
    private readonly now: () => number = Date.now,
    private readonly shared?: SharedSessionEnds,
  ) {
    // A key of its own for sessions (HKDF, RFC 5869), never the token or a bare hash of it.
    this.key = adminToken === undefined ? undefined : Buffer.from(hkdfSync('sha256', adminToken, '', 'bot-agent console session v2', 32));
  }

  /** Whether sessions can be had at all: only where an admin token is set. */
  get available(): boolean {
    return this.key !== undefined;
  }

  /** Whether `token` is the admin token, in a time that does not depend on how much of it is right. */
  holdsToken(token: string): boolean {
    return this.adminToken !== undefined && timingSafeEqual(digest(token), digest(this.adminToken));
  }

  /** A new session's cookie value. */
  issue(): string {
    const body = `${this.now() + SESSION_MS}.${randomBytes(16).toString('base64url')}`;
    return `${body}.${this.sign(body)}`;
  }

  /** Whether `value` is a session this agent's token signed, not expired and not ended. */
  valid(value: string | undefined): boolean {
    if (value === undefined || this.key === undefined || this.ended.has(value)) return false;
    const [expiry, nonce, signature, ...rest] = value.split('.');
    if (expiry === undefined || nonce === undefined || signature === undefined || rest.length > 0) return false;
    const expected = Buffer.from(this.sign(`${expiry}.${nonce}`));
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected) && Number(expiry) > this.now();
  }

  /** Whether `value` is a valid session (as `valid` says) that no agent sharing the store has ended either. */
  async current(value: string | undefined): Promise<boolean> {
    if (!this.valid(value)) return false;
    return !(await this.shared?.ended(nonceOf(value!)));
  }

  /** Ends the session, for this agent at once and for those sharing its store, until it would have expired. */
  async end(value: string | undefined): Promise<void> {
    if (!this.valid(value)) return;
    const now = this.now();
    for (const [ended, expiry] of this.ended) if (expiry <= now) this.ended.delete(ended);
    const expiry = Number(value!.split('.')[0]);
    this.ended.set(value!, expiry);
    await this.shared?.end(nonceOf(value!), expiry);
  }

  private sign(body: string): string {
    return createHmac('sha256', this.key!).update(body).digest('base64url');
  }
}
