import type { Config } from '../config.js';
import { BotTokens } from '../identity/bot-tokens.js';
import type { BotTokenVerifier } from '../identity/bot-tokens.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { BotLocks } from './bot-locks.js';
import type { FaultReporter, RuntimeDriver } from './driver.js';
import { readRegistryLogins } from '../provisioning/registry-credentials.js';

/** The configured runtime: its driver, its provisioner, and its locks across agents where it has them. */
export interface Runtime {
  readonly driver: RuntimeDriver;
  readonly provisioner: Provisioner | undefined;
  /** Locks that serialise lifecycle operations across agents, held as `holder`; undefined where the runtime has none. */
  readonly sharedLocks?: (holder: string) => BotLocks;
  /** What names a bot by its token: those the agent signs (Docker), or the cluster's ServiceAccount tokens. */
  readonly botTokens?: BotTokenVerifier;
}

/**
 * The runtime the configuration names. Throws when the runtime's own
 * configuration cannot be read.
 */
export async function createRuntime(config: Config, report: FaultReporter): Promise<Runtime> {
  switch (config.runtime) {
    case 'docker': {
      // Loaded only here, as client-node is below: dockerode costs a Kubernetes agent some 5 MB of heap, 10 MB resident.
      const { engineClients } = await import('./docker/docker-connection.js');
      const { createDockerDriver } = await import('./docker/docker-driver.js');
      const { createDockerProvisioner } = await import('./docker/docker-provisioner.js');
      const botTokens = BotTokens.open(config.dataDir);
      const engine = engineClients(config.dockerHost);
      return {
        driver: createDockerDriver({ dockerHost: config.dockerHost, engine, report }),
        provisioner: createDockerProvisioner({
          dockerHost: config.dockerHost,
          engine,
          network: config.botsNetwork,
          agentUrl: config.botsAgentUrl,
          tokens: botTokens,
          pullTimeoutMs: config.pullTimeoutMs,
          registries: config.registries,
          registryLogins: config.registryAuthFile === undefined ? undefined : readRegistryLogins(config.registryAuthFile),
        }),
        botTokens,
      };
    }
    case 'kubernetes': {
      // Loaded only here: client-node alone costs a Docker agent some 45 MB of memory.
      const { botNamespace, clusterKubeConfig } = await import('./kubernetes/kube-connection.js');
      const { createKubernetesDriver } = await import('./kubernetes/kube-driver.js');
      const { createKubernetesProvisioner } = await import('./kubernetes/kube-provisioner.js');
      const { LeaseLocks } = await import('./kubernetes/kube-leases.js');
      const { ServiceAccountTokens } = await import('./kubernetes/kube-token-review.js');
      const kubeConfig = clusterKubeConfig();
      const namespace = botNamespace(config.namespace);
      const driver = createKubernetesDriver({ kubeConfig, namespace, report });
      return {
        driver,
        provisioner: createKubernetesProvisioner({
          kubeConfig,
          namespace,
          agentUrl: config.botsAgentUrl,
          pullSecrets: config.imagePullSecrets,
          pullTimeoutMs: config.pullTimeoutMs,
          registries: config.registries,
          watchedDeployments: () => driver.watchedDeployments(),
          // The chart's Role grants the helper pods of backups only with provisioning (docs/kubernetes.md).
          backups: config.provisioning,
        }),
        sharedLocks: (holder) => new LeaseLocks(kubeConfig, namespace, holder),
        botTokens: new ServiceAccountTokens(kubeConfig, namespace, Date.now, report),
      };
    }
  }
}
