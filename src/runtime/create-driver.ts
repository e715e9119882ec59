import type { Config } from '../config.js';
import { createDockerDriver } from './docker/docker-driver.js';
import type { RuntimeDriver } from './driver.js';
import { botNamespace, clusterKubeConfig } from './kubernetes/kube-connection.js';
import { createKubernetesDriver } from './kubernetes/kube-driver.js';

/** The driver for the configured runtime. Throws when the runtime's own configuration cannot be read. */
export function createDriver(config: Config): RuntimeDriver {
  switch (config.runtime) {
    case 'docker':
      return createDockerDriver({ dockerHost: config.dockerHost });
    case 'kubernetes':
      return createKubernetesDriver({ kubeConfig: clusterKubeConfig(), namespace: botNamespace(config.namespace) });
  }
}
