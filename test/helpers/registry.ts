import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { TEST_IMAGE } from './docker-fixture.js';

/** The login of the registry npm test starts (scripts/registry.sh's defaults). */
export const REGISTRY_LOGIN = { username: 'botagent', password: 'registry-local-only' } as const;

/** The registry npm test starts (scripts/registry.sh), host:port; a test file that needs it fails loudly without it. */
export function testRegistry(): string {
  const address = process.env.BOT_AGENT_REGISTRY;
  if (!address) throw new Error('BOT_AGENT_REGISTRY is not set: run the tests with npm test, which starts the registry (scripts/registry.sh)');
  return address;
}

/** Drains a stream of the engine's progress lines, throwing the first error line it carries. */
async function drained(stream: NodeJS.ReadableStream): Promise<void> {
  let text = '';
  for await (const chunk of stream) text += String(chunk);
  const failed = text.split('\n').map((line) => (line.trim() ? (JSON.parse(line) as { error?: string }) : {})).find((line) => line.error);
  if (failed?.error) throw new Error(failed.error);
}

/**
 * The test image pushed to the test registry under a name of its own (`tests/<name>-<random>:<tag>`), and no
 * longer on the engine under that name: a create that names it must pull it. `script` becomes the image's
 * command (the test image is busybox).
 */
export async function pushedImage(docker: Docker, name: string, { tag = 'v1', script }: { tag?: string; script?: string } = {}): Promise<string> {
  return pushedAs(docker, `${testRegistry()}/tests/${name}-${randomBytes(4).toString('hex')}`, tag, script);
}

/** The test image pushed to the test registry as `repo:tag` (`repo` naming the registry), and no longer on the engine under that name. */
export async function pushedAs(docker: Docker, repo: string, tag: string, script?: string): Promise<string> {
  const image = `${repo}:${tag}`;
  if (script === undefined) {
    await docker.getImage(TEST_IMAGE).tag({ repo, tag });
  } else {
    // An image of its own whose command is the script: made as a container committed with a new Cmd.
    const container = await docker.createContainer({ Image: TEST_IMAGE, Cmd: ['true'] });
    await container.commit({ repo, tag, changes: [`CMD ["sh", "-c", ${JSON.stringify(script)}]`] });
    await container.remove({ force: true });
  }
  await drained((await docker.getImage(image).push({ authconfig: { ...REGISTRY_LOGIN, serveraddress: testRegistry() } })) as NodeJS.ReadableStream);
  await docker.getImage(image).remove();
  return image;
}
