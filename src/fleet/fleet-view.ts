import { fleetRequest, reasonOf } from './fleet-client.js';
import type { NodeBeacon } from './node-beacon.js';

/** How long another node's agent has to answer for its bots' rows before the table is drawn without them. */
const OTHER_NODE_MS = 5_000;

/**
 * The console's table over the whole fleet (docs/api.md §17): the rows of each other node whose agent is
 * alive and says where it is reached, asked of that agent with the fleet's key, all at once. A node that does
 * not answer in time is left out and reported; GET /api/admin/nodes says which nodes are away.
 */
export function otherNodesRows(nodes: Pick<NodeBeacon, 'nodes'>, fleetKey: string, report: (what: string, err: unknown) => void): () => Promise<unknown[]> {
  return async () => {
    let listed: Awaited<ReturnType<NodeBeacon['nodes']>>;
    try {
      listed = await nodes.nodes();
    } catch (err) {
      report("the other nodes' bots were left out of the console's table: the fleet's nodes could not be read", err);
      return [];
    }
    const others = listed.filter((node) => !node.self && node.alive && node.url !== null);
    const rows = await Promise.all(
      others.map(async (node) => {
        try {
          const answer = await fleetRequest(new URL('/api/console/fleet', node.url ?? ''), fleetKey, { signal: AbortSignal.timeout(OTHER_NODE_MS) });
          const body = (await answer.body.json()) as { bots?: unknown };
          if (answer.statusCode !== 200 || !Array.isArray(body.bots)) throw new Error(`answered ${answer.statusCode}`);
          return body.bots as unknown[];
        } catch (err) {
          report(`node ${node.node}'s bots were left out of the console's table: ${reasonOf(err)}`, err);
          return [];
        }
      }),
    );
    return rows.flat();
  };
}
