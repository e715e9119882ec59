import type { Config } from '../config.js';
import { createDockerDriver } from './docker/docker-driver.js';
import type { RuntimeDriver } from './driver.js';

/**
 * The driver for the configured runtime. Throws when the runtime's own
 * configuration cannot be read.
 */
export async function createDriver(config: Config): Promise<RuntimeDriver> {
  switch (config.runtime) {
    case 'docker':
      return createDockerDriver({ dockerHost: config.dockerHost });
    case 'kubernetes': {
      // Loaded only here: client-node alone costs a Docker agent some 45 MB of memory.
      const { botNamespace, clusterKubeConfig } = await import('./kubernetes/kube-connection.js');
      const { createKubernetesDriver } = await import('./kubernetes/kube-driver.js');
      return createKubernetesDriver({ kubeConfig: clusterKubeConfig(), namespace: botNamespace(config.namespace) });
    }
  }
}
