import { Writable } from 'node:stream';
import { Exec } from '@kubernetes/client-node';
import type { KubeConfig, V1Status } from '@kubernetes/client-node';
import { NC_SCRIPT, parseRawReply, rawRequest } from '../helpers/raw-http.js';
import type { RawReply } from '../helpers/raw-http.js';

/** What `command` printed, run in the pod's `container` through the API server (the kubelet's exec). */
export async function execInPod(admin: KubeConfig, namespace: string, pod: string, command: string[], container = 'bot'): Promise<string> {
  const chunks: Buffer[] = [];
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      done();
    },
  });
  const stderr: Buffer[] = [];
  const errors = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stderr.push(chunk);
      done();
    },
  });
  const status = await new Promise<V1Status>((resolve, reject) => {
    new Exec(admin).exec(namespace, pod, container, command, stdout, errors, null, false, resolve).catch(reject);
  });
  const output = Buffer.concat(chunks).toString('utf8');
  if (status.status !== 'Success' && output === '') {
    throw new Error(`exec in ${pod} failed: ${status.message ?? status.reason ?? 'no status'}; stderr: ${Buffer.concat(stderr).toString('utf8')}`);
  }
  return output;
}

/** An HTTP call made from inside a bot's pod with busybox nc, so that the agent sees the pod's own IP. */
export async function httpFromPod(
  admin: KubeConfig,
  namespace: string,
  pod: string,
  target: { host: string; port: number },
  request: Parameters<typeof rawRequest>[0],
): Promise<RawReply> {
  const env = ['env', `REQUEST=${rawRequest(request)}`, `AGENT_HOST=${target.host}`, `AGENT_PORT=${target.port}`];
  const command = [...env, 'sh', '-c', NC_SCRIPT];
  // A connection that never opened (busybox nc's -w bounds the connect alone), so that the agent saw no
  // request, is tried again, 5 s apart: cold runs saw pods' connections to the host time out for up to a
  // minute while the pods' bridge took its lowest port's MAC (now set once by kube:up; see scripts/kube/up.sh).
  for (let attempt = 1; ; attempt += 1) {
    try {
      return parseRawReply(await execInPod(admin, namespace, pod, command));
    } catch (err) {
      if (attempt === 3 || !/nc: timed out/.test((err as Error).message)) throw err;
      console.warn(`a connection from pod ${pod} to the agent never opened (attempt ${attempt}); trying again in 5 s`);
      await new Promise((resolve) => setTimeout(resolve, 5_000));
    }
  }
}
