import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** Debian's docker.io CLI, which the set-up installs beside the engine; else whatever is on PATH. */
export const dockerCli = existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';

/** A build context holding what the Dockerfile copies, and the registry's CA when npm needs one. */
async function buildContext(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'bot-agent-build-'));
  for (const entry of ['Dockerfile', '.dockerignore', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src']) {
    await cp(entry, join(dir, entry), { recursive: true });
  }
  if (process.env.NODE_EXTRA_CA_CERTS) await cp(process.env.NODE_EXTRA_CA_CERTS, join(dir, 'npm-ca.pem'));
  return dir;
}

/**
 * Builds the agent's image from the project's Dockerfile as `tag`, on the
 * stand-in base image of the project's own Node (no registry is reached).
 */
export async function buildAgentImage(tag: string): Promise<void> {
  const { stdout: baseImage } = await run('bash', ['scripts/node-base-image.sh']);
  const context = await buildContext();
  try {
    await run(dockerCli, ['build', '-q', '-t', tag, '--build-arg', `BASE_IMAGE=${baseImage.trim()}`, context], {
      maxBuffer: 64 * 1024 * 1024,
    });
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}
