import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform } from 'node:stream';

type Mode = 'open' | 'cut' | 'stall';

const REQUEST_LINE = /^(?:GET|HEAD|POST|PUT|PATCH|DELETE) \S+ HTTP\/1\.[01]$/gm;

/**
 * A unix socket in front of the Docker engine's (or a loopback port in front of
 * a TCP server, such as the cluster's API server), which a test can cut (every
 * connection dropped, new ones refused), stall (connections accepted, never
 * answered) and restore, without touching what other tests share.
 */
export class SocketProxy {
  readonly path = join(tmpdir(), `docker-proxy-${process.pid}-${Math.random().toString(36).slice(2)}.sock`);
  private mode: Mode = 'open';
  /** The request line (`GET /v1.41/containers/.../stats?stream=true`) of every HTTP request passed on, in order. */
  readonly requests: string[] = [];
  private readonly pairs = new Set<[Socket, Socket | undefined]>();
  /** The request lines each client connection has carried. */
  private readonly carried = new Map<Socket, string[]>();
  private readonly delays: Array<{ pattern: RegExp; ms: number }> = [];
  private readonly answerDelays: Array<{ pattern: RegExp; ms: number } | { pattern: RegExp; released: Promise<unknown> }> = [];
  private readonly drops: RegExp[] = [];
  private readonly awaited: Array<{ text: string; found: () => void }> = [];
  private readonly holds: Array<{ text: string[]; until: string[] }> = [];
  /** How many requests `dropOnce` dropped. */
  dropped = 0;
  /** The most connections open at once (a client that keeps connections alive opens one per request under way). */
  peakConnections = 0;
  /**
   * The most requests under way at once: passed on, and not yet answered (their answer's first bytes not back).
   * Unlike connections, not swollen by connections a loaded client has not closed yet.
   */
  peakInFlight = 0;
  private inFlight = 0;
  /** Requests under way now. */
  get underWay(): number {
    return this.inFlight;
  }
  private server: Server | undefined;
  /** Every connection a client opened to the engine through the proxy, since it started. */
  connectionsAccepted = 0;

  /** `upstream`: a unix socket's path, or a TCP address, which the proxy then serves on a loopback port. */
  constructor(private readonly upstream: string | { host: string; port: number } = '/var/run/docker.sock') {}

  /** DOCKER_HOST for a driver behind this proxy. */
  get dockerHost(): string {
    return `unix://${this.path}`;
  }

  /** The loopback port of a proxy in front of a TCP address. */
  get port(): number {
    return (this.server?.address() as AddressInfo).port;
  }

  async start(): Promise<void> {
    this.server = createServer((client) => this.accept(client));
    if (typeof this.upstream === 'string') this.server.listen(this.path);
    else this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
  }

  /** Holds each request whose request line matches `pattern` for `ms` before passing it on. */
  delay(pattern: RegExp, ms: number): void {
    this.delays.push({ pattern, ms });
  }

  /**
   * Holds back the answer of each request whose request line matches `pattern` for `ms` after the engine
   * sent it (an answer that grows stale on its way: what it says may no longer be so when it arrives).
   */
  delayAnswers(pattern: RegExp, ms: number): void {
    this.answerDelays.push({ pattern, ms });
  }

  /** Holds back the answer of each request whose request line matches `pattern` until `released` settles. */
  answersHeldUntil(pattern: RegExp, released: Promise<unknown>): void {
    this.answerDelays.push({ pattern, released });
  }

  /** Holds nothing back any more. */
  undelay(): void {
    this.delays.length = 0;
    this.answerDelays.length = 0;
  }

  /** Drops the connection of the next request whose request line matches `pattern`, once. */
  dropOnce(pattern: RegExp): void {
    this.drops.push(pattern);
  }

  /**
   * Passes back each piece of an answer that contains every string of `text`
   * only after the next piece on its connection that contains every string of
   * `until` (an engine that reports two events the other way round). Once an
   * `until` has passed on a connection, its pieces pass at once: the engine
   * sent them the other way round itself.
   */
  holdAnswers(text: string[], until: string[]): void {
    this.holds.push({ text, until });
  }

  /** Resolves once an answer passed back contains `text` (found within one chunk). */
  answered(text: string): Promise<void> {
    return new Promise((found) => this.awaited.push({ text, found }));
  }

  /** Drops the connections that have carried a request whose request line matches `pattern` (a stream the engine ends). */
  dropConnections(pattern: RegExp): number {
    let dropped = 0;
    for (const [client, engine] of this.pairs) {
      if (!(this.carried.get(client) ?? []).some((line) => pattern.test(line))) continue;
      client.destroy();
      engine?.destroy();
      dropped++;
    }
    return dropped;
  }

  /** Drops every connection and refuses new ones. */
  cut(): void {
    this.mode = 'cut';
    this.dropAll();
  }

  /** Freezes every connection and accepts new ones without ever answering. */
  stall(): void {
    this.mode = 'stall';
    for (const [client, engine] of this.pairs) {
      client.unpipe();
      engine?.unpipe();
      client.pause();
      engine?.pause();
    }
  }

  /** Back to forwarding; connections frozen by a stall are dropped, as a restarted engine would. */
  restore(): void {
    this.mode = 'open';
    this.dropAll();
  }

  async close(): Promise<void> {
    this.dropAll();
    this.server?.close();
    rmSync(this.path, { force: true });
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'cut') {
      client.destroy();
      return;
    }
    const pair: [Socket, Socket | undefined] = [client, undefined];
    this.connectionsAccepted += 1;
    this.pairs.add(pair);
    this.peakConnections = Math.max(this.peakConnections, this.pairs.size);
    client.on('close', () => {
      pair[1]?.destroy();
      this.pairs.delete(pair);
      this.carried.delete(client);
    });
    if (this.mode === 'stall') return;
    const engine = typeof this.upstream === 'string' ? connect(this.upstream) : connect(this.upstream.port, this.upstream.host);
    pair[1] = engine;
    engine.on('error', () => client.destroy());
    engine.on('close', () => client.destroy());
    const waiting = { requests: 0 };
    client.on('close', () => {
      this.inFlight -= waiting.requests;
      waiting.requests = 0;
    });
    this.forward(client, engine, waiting);
    engine.on('data', (chunk: Buffer) => {
      if (waiting.requests > 0 && /^HTTP\/1\.[01] \d{3}/.test(chunk.toString('latin1', 0, 16))) {
        waiting.requests -= 1;
        this.inFlight -= 1;
      }
      if (this.awaited.length === 0) return;
      const text = chunk.toString('latin1');
      for (const waiter of this.awaited.filter((waiting) => text.includes(waiting.text))) {
        this.awaited.splice(this.awaited.indexOf(waiter), 1);
        waiter.found();
      }
    });
    engine.pipe(this.reorder()).pipe(this.answersDelayed(client)).pipe(client);
  }

  /** Passes an answer on after the delay `delayAnswers` gives the connection's latest request, in order. */
  private answersDelayed(client: Socket): Transform {
    return new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        const latest = this.carried.get(client)?.at(-1) ?? '';
        const rule = this.answerDelays.find(({ pattern }) => pattern.test(latest));
        if (rule === undefined) done(null, chunk);
        else if ('released' in rule) void rule.released.finally(() => done(null, chunk));
        else setTimeout(() => done(null, chunk), rule.ms);
      },
    });
  }

  /** The answers of one connection, with the pieces `holdAnswers` names moved after their `until`. */
  private reorder(): Transform {
    const held: Array<{ chunk: Buffer; until: string[] }> = [];
    const passed = new Set<{ text: string[]; until: string[] }>();
    const has = (text: string, parts: string[]): boolean => parts.every((part) => text.includes(part));
    return new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        const text = chunk.toString('latin1');
        const hold = this.holds.find((rule) => !passed.has(rule) && has(text, rule.text) && !has(text, rule.until));
        for (const rule of this.holds) if (has(text, rule.until)) passed.add(rule);
        if (hold) {
          held.push({ chunk, until: hold.until });
          done();
          return;
        }
        const released = held.filter((piece) => has(text, piece.until));
        for (const piece of released) held.splice(held.indexOf(piece), 1);
        done(null, Buffer.concat([chunk, ...released.map((piece) => piece.chunk)]));
      },
    });
  }

  /** Passes the client's bytes on; a request a delay names is held back, one a drop names ends its connection. */
  private forward(client: Socket, engine: Socket, waiting: { requests: number }): void {
    // Request by request, on every connection: a keep-alive connection carries many, and may predate a rule.
    client.on('data', (chunk: Buffer) => {
      const lines = [...chunk.toString('latin1').matchAll(REQUEST_LINE)].map(([line]) => line);
      this.requests.push(...lines);
      this.carried.set(client, [...(this.carried.get(client) ?? []), ...lines]);
      const drop = this.drops.findIndex((pattern) => lines.some((line) => pattern.test(line)));
      if (drop >= 0) {
        this.drops.splice(drop, 1);
        this.dropped++;
        client.destroy();
        engine.destroy();
        return;
      }
      waiting.requests += lines.length;
      this.inFlight += lines.length;
      this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
      const ms = this.delays.find(({ pattern }) => lines.some((line) => pattern.test(line)))?.ms ?? 0;
      client.pause();
      const pass = (): void => {
        if (engine.destroyed) return;
        engine.write(chunk, () => {
          if (this.mode !== 'stall') client.resume();
        });
      };
      if (ms > 0) setTimeout(pass, ms);
      else pass();
    });
    client.on('end', () => engine.end());
  }

  private dropAll(): void {
    for (const [client, engine] of this.pairs) {
      client.destroy();
      engine?.destroy();
    }
    this.pairs.clear();
  }
}
