import { parseFamiliarName } from '@swimlane/docker-reference';

/** Docker Hub's host, as Docker names it for images without a registry of their own. */
export const DOCKER_HUB = 'docker.io';

/** An image reference as the engine reads it (distribution's reference grammar, normalized as `docker pull` does). */
export interface ImageReference {
  /** The registry host it pulls from: `docker.io` for Docker Hub, however named (`python`, `index.docker.io/...`). */
  readonly registry: string;
  /** The repository with its registry, e.g. `docker.io/library/python`: one name for each way of writing it. */
  readonly repository: string;
  readonly tag: string | undefined;
  readonly digest: string | undefined;
}

/**
 * The one parser of image references (docs/api.md §14): `python:3`, `library/python:3`, `docker.io/library/python:3`
 * and `index.docker.io/library/python:3` are one repository of Docker Hub. Undefined for what is not a reference.
 */
export function imageReference(image: string): ImageReference | undefined {
  try {
    const parsed = parseFamiliarName(image);
    const registry = parsed.domain ?? '';
    if (registry === '' || parsed.repository === undefined) return undefined;
    return { registry, repository: `${registry}/${parsed.repository}`, tag: parsed.tag, digest: parsed.digest };
  } catch {
    return undefined;
  }
}

/** The registry host an image pulls from; Docker Hub for a name the grammar refuses (the engine refuses it too). */
export function registryOf(image: string): string {
  return imageReference(image)?.registry ?? DOCKER_HUB;
}
