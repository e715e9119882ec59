import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { privateDir, PRIVATE_FILE_MODE } from '../private-files.js';

/** What HKDF is told the key is for. */
const PURPOSE = 'bot-agent bot chat secrets v1';
/** How a sealed row begins: a row kept before sealing is plain JSON (`{`). */
const VERSION = 'sealed1';
/** The key of an agent with no fleet key and no admin token, kept beside its history. */
const KEY_FILE = 'chat-secrets.key';

/**
 * A bot's own chats as the store keeps them (docs/api.md §16): their webhook URLs and tokens sealed with
 * AES-256-GCM under a key derived (HKDF) from a secret the agents hold and the database does not, bound to the
 * bot (its id is the additional data: a row moved to another bot does not open).
 */
export class ChatSeal {
  private readonly key: Buffer;

  constructor(secret: string | Buffer) {
    this.key = Buffer.from(hkdfSync('sha256', secret, '', PURPOSE, 32));
  }

  /**
   * The key of the agents' own secret: the fleet key where there is one (every agent of a fleet holds it), else
   * the admin token (an HA pair's), else a key of this agent's own in AGENT_DATA_DIR (in memory for ':memory:').
   */
  static forAgent(fleetKey: string | undefined, adminToken: string | undefined, dataDir: string): ChatSeal {
    const shared = fleetKey ?? adminToken;
    if (shared !== undefined) return new ChatSeal(shared);
    if (dataDir === ':memory:') return new ChatSeal(randomBytes(32));
    privateDir(dataDir);
    const file = join(dataDir, KEY_FILE);
    if (!existsSync(file)) {
      // Written whole under another name, then renamed: a power cut leaves no key file, never an empty one.
      const writing = `${file}.${process.pid}`;
      writeFileSync(writing, randomBytes(32).toString('base64url'), { mode: PRIVATE_FILE_MODE });
      const handle = openSync(writing, 'r');
      fsyncSync(handle);
      closeSync(handle);
      renameSync(writing, file);
    }
    return new ChatSeal(readFileSync(file, 'utf8').trim());
  }

  /** The text kept for the bot's chats (their JSON). */
  seal(botId: string, json: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(botId));
    const sealed = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), sealed.toString('base64url')].join('.');
  }

  /** The chats' JSON from what the store keeps; a row kept before sealing as it is. Throws for a row this key does not open. */
  open(botId: string, kept: string): string {
    if (!kept.startsWith(`${VERSION}.`)) return kept;
    const [, iv = '', tag = '', sealed = ''] = kept.split('.');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url')).setAAD(Buffer.from(botId));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]).toString('utf8');
  }
}
