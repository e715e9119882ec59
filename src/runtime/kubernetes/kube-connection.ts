import { existsSync, readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The API server's address and credentials: the pod's service account when
 * the agent runs in a cluster, else KUBECONFIG or ~/.kube/config (read by client-node).
 */
export function clusterKubeConfig(): KubeConfig {
  const kubeConfig = new KubeConfig();
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
