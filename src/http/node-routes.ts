import Router from '@koa/router';
import { messages } from '../errors.js';
import type { NodeBeacon } from '../fleet/node-beacon.js';
import type { Access } from './access.js';

export interface NodeRoutesDeps {
  readonly nodes: Pick<NodeBeacon, 'node' | 'nodes'>;
  readonly access: Access;
}

/** The fleet's nodes (docs/api.md §17): the platform's alone. */
export function nodeRoutes({ nodes, access }: NodeRoutesDeps): Router {
  const router = new Router();
  router.get('/api/admin/nodes', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyNodes);
    ctx.body = { ok: true, node: nodes.node, nodes: await nodes.nodes() };
  });
  return router;
}
