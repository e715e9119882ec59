import type { DockerOptions } from 'dockerode';

/**
 * dockerode options for a DOCKER_HOST value, read as the docker CLI reads it:
 * `unix:///path` is a socket, `tcp://host:port` plain HTTP, `https://` TLS.
 */
export function dockerConnection(dockerHost: string): DockerOptions {
  const url = new URL(dockerHost);
  if (url.protocol === 'unix:') return { socketPath: url.pathname };
  const secure = url.protocol === 'https:';
  return {
    protocol: secure ? 'https' : 'http',
    host: url.hostname,
    port: Number(url.port) || (secure ? 2376 : 2375),
  };
}
