// The two baselines every bench loads beside the agent, each run as a module of its own (node -e).

/** A stats answer's size and shape, as the baselines answer it. */
export const STATS_JSON = JSON.stringify({ ok: true, stats: { cpu_percent: 0.12, memory_usage: '1.23 MB', memory_percent: 0.01, uptime: '1h 2m' } });

/**
 * The baselines' code, listening at `host`:`port`: bare node:http (the floor of any Node server), and koa with
 * @koa/router (the floor of this stack: the agent is koa and its router plus its own middleware). Evaluated in the
 * project's folder, so that koa resolves from its node_modules.
 */
export const BASELINES = {
  node: (port: number, host: string) => `import http from 'node:http';
    http.createServer((q, r) => { r.writeHead(200, { 'content-type': 'application/json' }); r.end(${JSON.stringify(STATS_JSON)}); }).listen(${port}, '${host}');`,
  koa: (port: number, host: string) => `import Koa from 'koa'; import Router from '@koa/router';
    const stats = ${STATS_JSON}.stats; const router = new Router();
    router.get('/api/bots/:bot_id/stats', (ctx) => { ctx.body = { ok: true, stats }; });
    new Koa().use(router.routes()).use(router.allowedMethods()).listen(${port}, '${host}');`,
};

export type BaselineKind = keyof typeof BASELINES;
