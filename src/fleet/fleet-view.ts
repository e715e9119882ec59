import { boundedJson, fleetRequest, reasonOf } from './fleet-client.js';
import type { NodeBot } from '../history/history-store.js';
import { urlOnNode } from './node-beacon.js';
import type { NodeBeacon } from './node-beacon.js';

/** How long another node's agent has to answer for its bots' rows before the table is drawn without them. */
const OTHER_NODE_MS = 5_000;
/** The most of another node's rows read: 10,000 bots' rows with their sparklines, twice over. */
export const OTHER_NODE_MAX_BYTES = 32 * 1024 * 1024;

/** A node's bots as its agent last said, for a node that is away or did not answer (docs/api.md §17). */
export interface LastKnownBots {
  readonly node: string;
  /** When its agent last renewed its row (ISO 8601). */
  readonly seenAt: string;
  readonly bots: readonly NodeBot[];
}

/** The other nodes' part of the console's table: rows their agents answered, and what is known of the rest. */
export interface OtherNodesRows {
  readonly rows: unknown[];
  readonly lastKnown: LastKnownBots[];
}

/**
 * The console's table over the whole fleet (docs/api.md §17): the rows of each other node whose agent is
 * alive and says where it is reached, asked of that agent with the fleet's key, all at once. A node that is
 * away, says no address, or does not answer in time is reported, and its bots are given as its agent last
 * said (from the shared database).
 */
export function otherNodesRows(nodes: Pick<NodeBeacon, 'nodes' | 'botsOf'>, fleetKey: string, report: (what: string, err: unknown) => void): () => Promise<OtherNodesRows> {
  return async () => {
    let listed: Awaited<ReturnType<NodeBeacon['nodes']>>;
    try {
      listed = await nodes.nodes();
    } catch (err) {
      report("the other nodes' bots were left out of the console's table: the fleet's nodes could not be read", err);
      return { rows: [], lastKnown: [] };
    }
    const others = listed.filter((node) => !node.self);
    const answers = await Promise.all(
      others.map(async (node): Promise<{ rows: unknown[] } | { lastKnown: LastKnownBots | undefined }> => {
        if (node.alive && node.url !== null) {
          try {
            const answer = await fleetRequest(urlOnNode(node.url, '/api/console/fleet'), fleetKey, { signal: AbortSignal.timeout(OTHER_NODE_MS) });
            const body = (await boundedJson(answer.body, OTHER_NODE_MAX_BYTES)) as { bots?: unknown };
            if (answer.statusCode !== 200 || !Array.isArray(body.bots)) throw new Error(`answered ${answer.statusCode}`);
            return { rows: body.bots as unknown[] };
          } catch (err) {
            report(`node ${node.node}'s bots are shown as its agent last said: ${reasonOf(err)}`, err);
          }
        }
        try {
          return { lastKnown: { node: node.node, seenAt: node.seen_at, bots: await nodes.botsOf(node.node) } };
        } catch (err) {
          report(`node ${node.node}'s bots were left out of the console's table: the fleet's database did not say them`, err);
          return { lastKnown: undefined };
        }
      }),
    );
    return {
      rows: answers.flatMap((answer) => ('rows' in answer ? answer.rows : [])),
      lastKnown: answers.flatMap((answer) => ('lastKnown' in answer && answer.lastKnown !== undefined ? [answer.lastKnown] : [])),
    };
  };
}
