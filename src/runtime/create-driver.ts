import type { Config } from '../config.js';
import { ConfigError } from '../config.js';
import { createDockerDriver } from './docker/docker-driver.js';
import type { RuntimeDriver } from './driver.js';

/** The driver for the configured runtime. */
export function createDriver(config: Config): RuntimeDriver {
  switch (config.runtime) {
    case 'docker':
      return createDockerDriver({ dockerHost: config.dockerHost });
    case 'kubernetes':
      throw new ConfigError('AGENT_RUNTIME=kubernetes: the Kubernetes driver is not part of this build yet');
  }
}
