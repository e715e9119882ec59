import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** What HKDF is told the key is for: a key of the fleet key's own, never the fleet key itself in the database. */
const PURPOSE = 'bot-agent fleet node rows v1';

/** The part of a node's row its seal covers. */
export interface SealedFields {
  readonly name: string;
  readonly url: string | null;
  readonly aliveMs: number;
}

/**
 * The seal on a node's row in the fleet's database (docs/api.md §17): an HMAC of its name, address and
 * liveness under a key derived from AGENT_FLEET_KEY. A row only a holder of the fleet key could have
 * written is the only one another agent sends that key to: the database's credentials alone make no node.
 */
export class NodeSeal {
  private readonly key: Buffer;

  constructor(fleetKey: string) {
    this.key = Buffer.from(hkdfSync('sha256', fleetKey, '', PURPOSE, 32));
  }

  /** The seal of these fields, as written beside them. */
  of({ name, url, aliveMs }: SealedFields): string {
    // As JSON: no two different rows read as one text.
    const text = JSON.stringify([name, url, aliveMs]);
    return createHmac('sha256', this.key).update(text).digest('base64url');
  }

  /** Whether `seal` is these fields' own. */
  holds(fields: SealedFields, seal: string | null): boolean {
    if (seal === null) return false;
    const expected = Buffer.from(this.of(fields));
    const given = Buffer.from(seal);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
