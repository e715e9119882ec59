// The baselines every bench loads beside the agent, each run as a module of its own (node -e).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { freePort } from '../test/helpers/free-port.js';

/** A stats answer's size and shape, as the baselines answer it. */
export const STATS_JSON = JSON.stringify({ ok: true, stats: { cpu_percent: 0.12, memory_usage: '1.23 MB', memory_percent: 0.01, uptime: '1h 2m' } });

/**
 * The baselines' code, listening at `host`:`port`: bare node:http (the floor of any Node server), koa with
 * @koa/router (the floor of this stack: the agent is koa and its router plus its own middleware), and koa with
 * @koa/router doing per request the four things the agent promises on every request, each as cheaply as its
 * library allows: a request id (taken from X-Request-Id or made from a prefix and a count) returned in a header,
 * the caller looked up by the socket's address (one Map), the request counted and timed in prom-client children
 * bound once per route and status, and the access line (the agent's fields) written by pino to a file. Its stats
 * read no bot; its logs call (POST /api/bots/logs, the body read by co-body, as the agent reads it) is dockerode's logs call and
 * the frames' payloads joined: the agent's driver, read limits and bounds are not in it. Evaluated in the project's
 * folder, so that its packages resolve from its node_modules.
 */
export const BASELINES = {
  node: (port: number, host: string) => `import http from 'node:http';
    http.createServer((q, r) => { r.writeHead(200, { 'content-type': 'application/json' }); r.end(${JSON.stringify(STATS_JSON)}); }).listen(${port}, '${host}');`,
  koa: (port: number, host: string) => `import Koa from 'koa'; import Router from '@koa/router';
    const stats = ${STATS_JSON}.stats; const router = new Router();
    router.get('/api/bots/:bot_id/stats', (ctx) => { ctx.body = { ok: true, stats }; });
    new Koa().use(router.routes()).use(router.allowedMethods()).listen(${port}, '${host}');`,
  promises: (port: number, host: string) => `import Koa from 'koa'; import Router from '@koa/router';
    import { randomBytes } from 'node:crypto'; import { rmSync } from 'node:fs'; import { tmpdir } from 'node:os'; import { join } from 'node:path';
    import { pino } from 'pino'; import { Counter, Histogram, Registry } from 'prom-client';
    import coBody from 'co-body'; import Docker from 'dockerode';
    const stats = ${STATS_JSON}.stats; const router = new Router();
    const logFile = join(tmpdir(), 'bot-agent-bench-promises-' + process.pid + '.log');
    process.on('exit', () => rmSync(logFile, { force: true }));
    const logger = pino({ base: { runtime: 'docker' } }, pino.destination({ dest: logFile, minLength: 8192, sync: false }));
    const registry = new Registry(); const labelNames = ['method', 'route', 'status'];
    const requests = new Counter({ name: 'requests_total', help: 'requests', labelNames, registers: [registry] });
    const latency = new Histogram({ name: 'request_duration_seconds', help: 'time to answer', labelNames, registers: [registry],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] });
    const series = new Map(); const botAt = new Map(); const prefix = randomBytes(6).toString('hex'); let made = 0;
    const identify = (ctx, botId) => { const bot = botAt.get(ctx.req.socket.remoteAddress); ctx.state.caller = bot === undefined ? 'platform' : 'bot:' + bot; ctx.state.botId = botId; };
    const app = new Koa();
    app.use(async (ctx, next) => {
      const started = performance.now(); const given = ctx.get('x-request-id');
      const requestId = /^[\\w.:-]{1,128}$/.test(given) ? given : prefix + '-' + (made++).toString(36);
      ctx.res.setHeader('X-Request-Id', requestId);
      await next();
      const seconds = (performance.now() - started) / 1000; const route = ctx._matchedRoute ?? 'unmatched'; const key = ctx.method + route + ctx.status;
      let counted = series.get(key);
      if (!counted) series.set(key, (counted = [requests.labels(ctx.method, route, String(ctx.status)), latency.labels(ctx.method, route, String(ctx.status))]));
      counted[0].inc(); counted[1].observe(seconds);
      logger.info({ requestId, method: ctx.method, route, path: ctx.path, status: ctx.status, ms: Math.round(seconds * 1000), caller: ctx.state.caller, botId: ctx.state.botId }, 'request');
    });
    router.get('/api/bots/:bot_id/stats', (ctx) => { identify(ctx, ctx.params.bot_id); ctx.body = { ok: true, stats }; });
    const docker = new Docker();
    router.post('/api/bots/logs', async (ctx) => {
      const { bot_id, lines } = await coBody.json(ctx); identify(ctx, bot_id);
      const framed = await docker.getContainer(bot_id).logs({ stdout: true, stderr: true, tail: lines, follow: false });
      const payloads = [];
      for (let at = 0; at + 8 <= framed.length; at += 8 + framed.readUInt32BE(at + 4)) payloads.push(framed.subarray(at + 8, at + 8 + framed.readUInt32BE(at + 4)));
      ctx.body = { ok: true, logs: Buffer.concat(payloads).toString('utf8') };
    });
    app.use(router.routes()).use(router.allowedMethods()).listen(${port}, '${host}');`,
};

export type BaselineKind = keyof typeof BASELINES;

/** A baseline server answering a stats-sized JSON to every GET of a bot's stats, in a process of its own as the agent is. */
export interface Baseline {
  readonly server: ChildProcess;
  /** Its address on loopback, without a trailing slash. */
  readonly base: string;
  readonly port: number;
}

/** Ends a baseline on SIGTERM as a normal exit, so that node writes its CPU profile when asked to take one. */
const EXIT_ON_SIGTERM = `process.on('SIGTERM', () => process.exit(0));`;

export async function baselineServer(kind: BaselineKind, nodeFlags: string[] = [], pin?: string): Promise<Baseline> {
  const port = await freePort();
  const command = [process.execPath, ...nodeFlags, '--input-type=module', '-e', `${BASELINES[kind](port, '0.0.0.0')} ${EXIT_ON_SIGTERM}`];
  // Pinned to a core (taskset execs node: the pid is the server's).
  const server = pin === undefined ? spawn(command[0] ?? '', command.slice(1), { stdio: 'ignore' }) : spawn('taskset', ['-c', pin, ...command], { stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  const probe = `${base}/api/bots/bot_1_1_probe/stats`;
  for (let i = 0; i < 100 && !(await fetch(probe).then((r) => r.ok, () => false)); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  return { server, base, port };
}
