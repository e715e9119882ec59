import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';
import type { RequestContext } from '@kubernetes/client-node';
import { Agent } from 'undici';

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The API server's address and credentials: the pod's service account when
 * the agent runs in a cluster, else KUBECONFIG or ~/.kube/config (read by client-node).
 */
export function clusterKubeConfig(): KubeConfig {
  const kubeConfig = new PooledKubeConfig();
  if (existsSync(`${SERVICE_ACCOUNT}/token`)) kubeConfig.loadFromCluster();
  else kubeConfig.loadFromDefault();
  return kubeConfig;
}

/** The bots' namespace: the configured one, else the pod's own, else `default`. */
export function botNamespace(configured: string | undefined): string {
  if (configured !== undefined) return configured;
  try {
    return readFileSync(`${SERVICE_ACCOUNT}/namespace`, 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

/**
 * At most this many quick calls go to the API server at once; more wait their turn, within their own deadline.
 * As many as to the engine: enough that a busy agent's lifecycle reads rarely queue behind its other calls.
 */
export const QUICK_API_CONNECTIONS = 32;
/** An idle connection is closed after this long. */
const IDLE_MS = 30_000;
/** How often the credentials the connections were made with are read again (a certificate rotated on disk). */
const CREDENTIALS_RECHECK_MS = 60_000;

interface Pools {
  readonly credentials: string;
  /** Reads, lists, patches: bounded, every connection kept for the next call. */
  readonly quick: Agent;
  /** Watches and followed logs, which hold their connection for as long as they last. */
  readonly lasting: Agent;
}

/** Whether a request holds its connection for as long as it lasts: a watch, or logs followed. */
const lasts = (url: string): boolean => /[?&](watch|follow)=true(&|$)/.test(url);

/**
 * A KubeConfig whose calls share connections to the API server (docs/performance.md,
 * "Connections to the API server"). client-node gives every request a dispatcher of its
 * own, so a TLS handshake of its own; here quick calls share at most
 * QUICK_API_CONNECTIONS kept-alive connections, and watches and followed logs
 * their own pool, so that they never hold a quick call's connection. Headers
 * (a service account's token, which rotates) are still set per request by
 * client-node; the TLS material is read again every minute and the pools made
 * anew when it changed. A connection the server closes leaves its pool.
 */
export class PooledKubeConfig extends KubeConfig {
  private pools: Pools | undefined;
  private checkedAt = -Infinity;
  private checking: Promise<Pools | undefined> | undefined;

  /** The same clusters, users and contexts as `config`, pooled. */
  static of(config: KubeConfig): PooledKubeConfig {
    const pooled = new PooledKubeConfig();
    pooled.loadFromOptions({ clusters: config.getClusters(), users: config.getUsers(), contexts: config.getContexts(), currentContext: config.getCurrentContext() });
    return pooled;
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    // None: plain HTTP, or no TLS material of the cluster's own; fetch's global dispatcher keeps connections then.
    if (context.getDispatcher() === undefined) return;
    const pools = await this.currentPools();
    if (pools) context.setDispatcher(lasts(context.getUrl()) ? pools.lasting : pools.quick);
  }

  private currentPools(): Promise<Pools | undefined> | Pools | undefined {
    if (Date.now() - this.checkedAt < CREDENTIALS_RECHECK_MS) return this.pools;
    this.checking ??= this.makePools().finally(() => {
      this.checking = undefined;
      this.checkedAt = Date.now();
    });
    return this.checking;
  }

  private async makePools(): Promise<Pools | undefined> {
    const options: https.AgentOptions & https.RequestOptions = {};
    await this.applyToHTTPSOptions(options);
    const made = this.createDispatcherOptions(this.getCurrentCluster(), options);
    // Through a proxy, client-node's own dispatcher per request is kept.
    const connect = made.type === 'agent' ? made.connect : undefined;
    const credentials = connect === undefined ? '' : createHash('sha256').update(JSON.stringify(connect)).digest('hex');
    if (credentials === this.pools?.credentials) return this.pools;
    const old = this.pools;
    this.pools =
      connect === undefined
        ? undefined
        : {
            credentials,
            quick: new Agent({ connect, connections: QUICK_API_CONNECTIONS, keepAliveTimeout: IDLE_MS }),
            lasting: new Agent({ connect, keepAliveTimeout: IDLE_MS }),
          };
    // Calls under way on the old connections end as they would have.
    void old?.quick.close().catch(() => undefined);
    void old?.lasting.close().catch(() => undefined);
    return this.pools;
  }
}
