import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, rmdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** Debian's docker.io CLI, which the set-up installs beside the engine; else whatever is on PATH. */
export const dockerCli = existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';

/** What the Dockerfile copies. */
const CONTEXT_ENTRIES = ['Dockerfile', '.dockerignore', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/bundle.sh', 'scripts/build-console.ts', 'src', 'console'];

/** A build context holding what the Dockerfile copies, and the registry's CA when npm needs one. */
async function buildContext(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'bot-agent-build-'));
  for (const entry of CONTEXT_ENTRIES) {
    await cp(entry, join(dir, entry), { recursive: true });
  }
  if (process.env.NODE_EXTRA_CA_CERTS) await cp(process.env.NODE_EXTRA_CA_CERTS, join(dir, 'npm-ca.pem'));
  return dir;
}

/** A digest of every file the build copies: the same sources build the same image. */
async function sourcesDigest(baseImage: string): Promise<string> {
  const hash = createHash('sha256').update(baseImage);
  const add = async (path: string): Promise<void> => {
    if ((await stat(path)).isDirectory()) {
      for (const entry of (await readdir(path)).sort()) await add(join(path, entry));
      return;
    }
    hash.update(path).update(await readFile(path));
  };
  for (const entry of CONTEXT_ENTRIES) if (existsSync(entry)) await add(entry);
  return hash.digest('hex').slice(0, 16);
}

const imageExists = (image: string): Promise<boolean> => run(dockerCli, ['image', 'inspect', image]).then(() => true, () => false);

/**
 * Builds the agent's image from the project's Dockerfile as `tag`, on the
 * stand-in base image of the project's own Node (no registry is reached).
 * Test files running at once share one build of the same sources (a build
 * costs a core for a minute or more): the first builds, the others wait for it.
 */
export async function buildAgentImage(tag: string): Promise<void> {
  const { stdout } = await run('bash', ['scripts/node-base-image.sh']);
  const baseImage = stdout.trim();
  const built = `bot-agent-test-build:${await sourcesDigest(baseImage)}`;
  const lock = join(tmpdir(), `${built.replace(/[^\w.-]/g, '-')}.lock`);
  for (let waited = 0; !(await imageExists(built)); waited += 500) {
    const mine = await mkdir(lock).then(() => true, () => false);
    if (mine) {
      try {
        if (!(await imageExists(built))) await build(built, baseImage);
      } finally {
        await rmdir(lock).catch(() => undefined);
      }
      break;
    }
    // A lock left by a test run that was killed mid-build is taken over after 10 minutes.
    if (waited > 600_000) await rmdir(lock).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await run(dockerCli, ['tag', built, tag]);
}

async function build(tag: string, baseImage: string): Promise<void> {
  const context = await buildContext();
  try {
    await run(dockerCli, ['build', '-q', '-t', tag, '--build-arg', `BASE_IMAGE=${baseImage}`, context], {
      maxBuffer: 64 * 1024 * 1024,
    });
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}
