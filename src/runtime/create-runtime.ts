import type { Config } from '../config.js';
import type { BotLocks } from '../lifecycle/bot-locks.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import { createDockerDriver } from './docker/docker-driver.js';
import { createDockerProvisioner } from './docker/docker-provisioner.js';
import type { FaultReporter, RuntimeDriver } from './driver.js';

/** The configured runtime: its driver, and its provisioner where there is one. */
export interface Runtime {
  readonly driver: RuntimeDriver;
  readonly provisioner: Provisioner | undefined;
  /** How lifecycle operations are serialised across agents; each agent's own queue when undefined. */
  readonly locks?: BotLocks;
}

/**
 * The runtime the configuration names. Throws when the runtime's own
 * configuration cannot be read.
 */
export async function createRuntime(config: Config, report: FaultReporter): Promise<Runtime> {
  switch (config.runtime) {
    case 'docker':
      return {
        driver: createDockerDriver({ dockerHost: config.dockerHost, report }),
        provisioner: createDockerProvisioner({
          dockerHost: config.dockerHost,
          network: config.botsNetwork,
          agentUrl: config.botsAgentUrl,
        }),
      };
    case 'kubernetes': {
      // Loaded only here: client-node alone costs a Docker agent some 45 MB of memory.
      const { botNamespace, clusterKubeConfig } = await import('./kubernetes/kube-connection.js');
      const { createKubernetesDriver } = await import('./kubernetes/kube-driver.js');
      const { createKubernetesProvisioner } = await import('./kubernetes/kube-provisioner.js');
      const kubeConfig = clusterKubeConfig();
      const namespace = botNamespace(config.namespace);
      // Several agents share the bots only with a shared history: then a Lease per bot in operation.
      const { LeaseLocks } = await import('../lifecycle/lease-locks.js');
      return {
        driver: createKubernetesDriver({ kubeConfig, namespace, report }),
        provisioner: createKubernetesProvisioner({ kubeConfig, namespace, agentUrl: config.botsAgentUrl }),
        locks: config.databaseUrl ? new LeaseLocks(kubeConfig, namespace, agentIdentity()) : undefined,
      };
    }
  }
}

/** Who this agent is, as a Lease's holder says: its pod's name (HOSTNAME in a pod), and its process. */
function agentIdentity(): string {
  return `${process.env.HOSTNAME ?? 'agent'}-${process.pid}`;
}
