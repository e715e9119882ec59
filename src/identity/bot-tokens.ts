import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { BOT_ID_PATTERN, GENERATION_PATTERN } from '../bot-id.js';
import { privateDir } from '../private-files.js';

/** How many verified tokens are kept (about 200 bytes each), and for how long. */
const VERIFIED_MAX = 10_000;
const VERIFIED_MS = 60_000;

/** What a bot token says once its signature holds: which bot, and when it was signed. */
export interface BotTokenClaim {
  readonly botId: string;
  /** The value its bot was made with (a `bat2` token), which the bot must still carry; none in a `bat1` token. */
  readonly generation: string | undefined;
  /** When it was signed (ms since the epoch, to the second). */
  readonly issuedMs: number;
}

/** A signing key: its id (a digest of it, never the key) and the key. */
interface SigningKey {
  readonly id: string;
  readonly secret: Buffer;
  /** When it began signing (ms since the epoch). */
  readonly since: number;
}

/** The keys' file in AGENT_DATA_DIR. */
export const KEYS_FILE = 'bot-token-keys.json';
/** How long a key that no longer signs still verifies, once a newer one signs. */
export const ROTATION_GRACE_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * A token's parts: `bat1` or `bat2`, its bot id as the contract allows ids (docs/api.md §1), in a `bat2` the
 * value the bot was made with, when it was signed, the key's id, the HMAC.
 */
const TOKEN = new RegExp(
  `^(bat1|bat2)\\.(${BOT_ID_PATTERN.source.replace(/^\^|\$$/g, '')})\\.(?:(${GENERATION_PATTERN.source.replace(/^\^|\$$/g, '')})\\.)?(\\d{1,13})\\.([A-Za-z0-9_-]{8})\\.([A-Za-z0-9_-]{43})$`,
);

function keyId(secret: Buffer): string {
  return createHash('sha256').update(secret).digest('base64url').slice(0, 8);
}

/** The refusal of a token of a bot removed since (another bot now has its id). */
const EARLIER_BOT = 'forbidden: the bot token belongs to an earlier bot of this id, since removed';

/** Why a bot token names nobody; said in the 403 (docs/api.md §4, rule 8). */
export class BadBotToken extends Error {}

/**
 * What names the bot a presented token (`Authorization: Bot <token>`) belongs to: the agent's own
 * signed tokens on Docker, the cluster's ServiceAccount tokens on Kubernetes.
 */
export interface BotTokenVerifier {
  /** The bot the token names, presented from `address`; rejects with BadBotToken saying why it names none. */
  botNamed(token: string, address?: string): Promise<string>;
  /** A token for the bot made with `generation` (none: bound to its id alone), where the agent issues them itself (Docker); a cluster issues its own. */
  sign?(botId: string, generation?: string): string;
  /**
   * From now on, refuses a token signed before its bot was removed (`removedAt`: when, if ever), so that
   * a bot created again under the same id is not named by the removed one's token. Where tokens are
   * bound to what runs the bot (a pod), there is nothing to do.
   */
  revokeRemovedBots?(removedAt: (botId: string) => Promise<number | undefined>): void;
  /**
   * From now on, names a bot only by a token of the bot that runs now: `generationOf` answers the value
   * the bot was made with (null: made without one; undefined: no such bot), from the runtime's index.
   */
  bindToRuntime?(generationOf: (botId: string) => Promise<string | null | undefined>): void;
}

/**
 * The tokens the agent signs for the bots it runs on Docker (docs/api.md §4,
 * rule 8): `bat1.<bot id>.<issued>.<key id>.<HMAC-SHA256>`, the HMAC over the
 * bot id and when it was signed, with a key kept in AGENT_DATA_DIR. The
 * newest key signs; one that a newer key replaced still verifies for
 * ROTATION_GRACE_MS. Verifying needs no state beyond the keys and the bots'
 * removals (kept in the shared history), so it is the same on every agent that
 * holds the same keys.
 */
export class BotTokens implements BotTokenVerifier {
  private removedAt: ((botId: string) => Promise<number | undefined>) | undefined;
  private generationOf: ((botId: string) => Promise<string | null | undefined>) | undefined;
  /**
   * Tokens whose signature held lately, with the key that signed them: a bot presents the same token on every
   * call (a heartbeat every few seconds), and an HMAC is most of what naming it costs. One is taken from here
   * only while its key still verifies.
   */
  private readonly verified = new LRUCache<string, { claim: BotTokenClaim; keyId: string }>({ max: VERIFIED_MAX, ttl: VERIFIED_MS });

  private constructor(
    private keys: SigningKey[],
    private readonly file: string | undefined,
    private readonly now: () => number,
  ) {}

  /** The keys kept in `dataDir`, a first one made (mode 0600) when there are none; in memory only for ':memory:'. */
  static open(dataDir: string, now: () => number = Date.now): BotTokens {
    if (dataDir === ':memory:') return new BotTokens([newKey(now())], undefined, now);
    const file = join(dataDir, KEYS_FILE);
    if (existsSync(file)) {
      const stored = JSON.parse(readFileSync(file, 'utf8')) as { keys: { secret: string; since: number }[] };
      const keys = stored.keys.map(({ secret, since }) => {
        const bytes = Buffer.from(secret, 'base64url');
        return { id: keyId(bytes), secret: bytes, since };
      });
      if (keys.length > 0) return new BotTokens(keys, file, now);
    }
    const tokens = new BotTokens([newKey(now())], file, now);
    tokens.save();
    return tokens;
  }

  /** A token that names the bot `botId` made with `generation` (`bat2`), or, without one, any bot of that id (`bat1`). */
  sign(botId: string, generation?: string): string {
    const key = this.keys.at(-1)!;
    if (generation !== undefined && !GENERATION_PATTERN.test(generation)) throw new Error('not a bot generation');
    const body = tokenBody(botId, generation, String(Math.floor(this.now() / 1000)));
    return `${body}.${key.id}.${mac(key.secret, body)}`;
  }

  async botNamed(token: string): Promise<string> {
    const { botId, generation, issuedMs } = this.verify(token);
    // The runtime's index, in memory, says which bot of that id runs now: a removed one's token names nobody,
    // whatever the database does (docs/api.md §4, rule 8). An engine that cannot be asked leaves the signature to judge.
    const current = await this.generationOf?.(botId).catch(() => undefined);
    // A token bound to the id alone never names a bot made with a value of its own.
    const otherBot = generation === undefined ? typeof current === 'string' : current !== undefined && current !== generation;
    if (otherBot) throw new BadBotToken(EARLIER_BOT);
    // The removals this agent made, or the database told it of, besides: they close the moment before the runtime's
    // index sees a removed bot go. While the store does not answer, the signature judges (docs/api.md §4, rule 8).
    const removed = await this.removedAt?.(botId).catch(() => undefined);
    // To the second, as tokens are signed: a token of the second of the removal itself still names the bot.
    if (removed !== undefined && issuedMs < Math.floor(removed / 1000) * 1000) {
      throw new BadBotToken('forbidden: the bot token was signed before its bot was removed');
    }
    return botId;
  }

  revokeRemovedBots(removedAt: (botId: string) => Promise<number | undefined>): void {
    this.removedAt = removedAt;
  }

  bindToRuntime(generationOf: (botId: string) => Promise<string | null | undefined>): void {
    this.generationOf = generationOf;
  }

  /** What the token claims, once its signature holds under a key that still verifies; BadBotToken says why not. */
  verify(token: string): BotTokenClaim {
    const known = this.verified.get(token);
    if (known !== undefined && this.verifying().some((key) => key.id === known.keyId)) return known.claim;
    const { claim, keyId } = this.verifySignature(token);
    this.verified.set(token, { claim, keyId });
    return claim;
  }

  private verifySignature(token: string): { claim: BotTokenClaim; keyId: string } {
    const parts = TOKEN.exec(token);
    if (!parts) throw new BadBotToken('forbidden: not a bot token this agent signs');
    const [, version = '', botId = '', generation, issued = '', id = '', signature = ''] = parts;
    if ((version === 'bat2') !== (generation !== undefined)) throw new BadBotToken('forbidden: not a bot token this agent signs');
    const key = this.verifying().find((candidate) => candidate.id === id);
    if (!key) throw new BadBotToken('forbidden: the bot token was signed with a key this agent no longer holds');
    const expected = Buffer.from(mac(key.secret, tokenBody(botId, generation, issued)));
    if (!timingSafeEqual(expected, Buffer.from(signature))) throw new BadBotToken('forbidden: the bot token is forged');
    return { claim: { botId, generation, issuedMs: Number(issued) * 1000 }, keyId: id };
  }

  /** A new key signs from now on; the one before still verifies for ROTATION_GRACE_MS. */
  rotate(): void {
    this.keys = [...this.verifying(), newKey(this.now())];
    this.save();
  }

  /** The keys that still verify: the newest, and those replaced less than ROTATION_GRACE_MS ago. */
  private verifying(): SigningKey[] {
    const now = this.now();
    return this.keys.filter((key, i) => {
      const replaced = this.keys[i + 1]?.since;
      return replaced === undefined || now - replaced < ROTATION_GRACE_MS;
    });
  }

  private save(): void {
    if (this.file === undefined) return;
    privateDir(join(this.file, '..'));
    const temporary = `${this.file}.${process.pid}.tmp`;
    const stored = { keys: this.keys.map((key) => ({ secret: key.secret.toString('base64url'), since: key.since })) };
    writeFileSync(temporary, `${JSON.stringify(stored)}\n`, { mode: 0o600 });
    chmodSync(temporary, 0o600);
    renameSync(temporary, this.file);
  }
}

function newKey(since: number): SigningKey {
  const secret = randomBytes(32);
  return { id: keyId(secret), secret, since };
}

/** What a token's HMAC is over: `bat1.<bot id>.<issued>`, or `bat2.<bot id>.<generation>.<issued>`. */
function tokenBody(botId: string, generation: string | undefined, issued: string): string {
  return generation === undefined ? `bat1.${botId}.${issued}` : `bat2.${botId}.${generation}.${issued}`;
}

function mac(secret: Buffer, body: string): string {
  return createHmac('sha256', secret).update(body).digest('base64url');
}
