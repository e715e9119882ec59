/** A fleet node's agent as operators configure it (docs/fleet.md): its port, data, the shared database, its name and address, the fleet's key. */
export function fleetNodeEnv(node: { name: string; port: number; dataDir: string; databaseUrl: string; fleetKey: string; dockerHost?: string }): Record<string, string> {
  return {
    ...(node.dockerHost === undefined ? {} : { DOCKER_HOST: node.dockerHost }),
    AGENT_PORT: String(node.port),
    AGENT_DATA_DIR: node.dataDir,
    AGENT_DATABASE_URL: node.databaseUrl,
    AGENT_NODE: node.name,
    AGENT_NODE_URL: `http://127.0.0.1:${node.port}`,
    AGENT_FLEET_KEY: node.fleetKey,
  };
}
