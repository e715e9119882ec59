import { inspect } from 'node:util';
import test from 'ava';
import type DockerModem from 'docker-modem';
import { engineClients } from '../../src/runtime/docker/docker-connection.js';

// docker-modem formats each request's options, its agent among them, with util.inspect (showHidden, no depth
// limit) on every call, debugging on or not: an agent formatted whole costs more than the call
// (docs/performance.md, "Connections to the engine"). The real engine's tests count the connections.
test("the engine clients' agents format as a word, however many connections their pools hold", (t) => {
  const { docker, lasting } = engineClients('unix:///var/run/docker.sock');
  for (const client of [docker, lasting]) {
    const { agent } = client.modem as DockerModem & { agent: object };
    t.is(inspect({ path: '/containers/x/json', agent }, { showHidden: true, depth: null }), "{ path: '/containers/x/json', agent: [Agent] }");
  }
  t.not((docker.modem as DockerModem & { agent: object }).agent, (lasting.modem as DockerModem & { agent: object }).agent);
});
