import test from 'ava';
import { imageReference, registryOf } from '../../src/provisioning/image-reference.js';
import { IMAGE_REFERENCE } from '../../src/http/schemas.js';

// Cases of distribution's own reference tests (reference_test.go, normalize_test.go in github.com/distribution/reference):
// the one parser reads each as `docker pull` does, and the create's schema takes exactly the references it parses.
const HEX64 = 'f'.repeat(64);

const valid: [string, string, string | undefined][] = [
  // reference, repository as normalized, tag
  ['test_com', 'docker.io/library/test_com', undefined],
  ['test.com:tag', 'docker.io/library/test.com', 'tag'],
  ['test.com:5000', 'docker.io/library/test.com', '5000'],
  ['test.com/repo:tag', 'test.com/repo', 'tag'],
  ['test:5000/repo', 'test:5000/repo', undefined],
  ['test:5000/repo:tag', 'test:5000/repo', 'tag'],
  [`test:5000/repo@sha256:${HEX64}`, 'test:5000/repo', undefined],
  [`test:5000/repo:tag@sha256:${HEX64}`, 'test:5000/repo', 'tag'],
  ['lowercase:Uppercase', 'docker.io/library/lowercase', 'Uppercase'],
  // 255 characters of name with its registry (distribution counts the normalized name: `docker.io/` takes 10).
  [`${'a/'.repeat(122)}a:tag-puts-this-over-max`, `docker.io/${'a/'.repeat(122)}a`, 'tag-puts-this-over-max'],
  ['sub-dom1.foo.com/bar/baz/quux', 'sub-dom1.foo.com/bar/baz/quux', undefined],
  ['sub-dom1.foo.com/bar/baz/quux:some-long-tag', 'sub-dom1.foo.com/bar/baz/quux', 'some-long-tag'],
  ['b.gcr.io/test.example.com/my-app:test.example.com', 'b.gcr.io/test.example.com/my-app', 'test.example.com'],
  ['xn--n3h.com/myimage:xn--n3h.com', 'xn--n3h.com/myimage', 'xn--n3h.com'],
  ['foo_bar.com:8080', 'docker.io/library/foo_bar.com', '8080'],
  ['foo/foo_bar.com:8080', 'docker.io/foo/foo_bar.com', '8080'],
  ['192.168.1.1/repo', '192.168.1.1/repo', undefined],
  ['192.168.1.1:5000/repo', '192.168.1.1:5000/repo', undefined],
  // Normalization: one repository, however Docker Hub is written.
  ['ubuntu', 'docker.io/library/ubuntu', undefined],
  ['library/ubuntu:22.04', 'docker.io/library/ubuntu', '22.04'],
  ['docker.io/library/ubuntu', 'docker.io/library/ubuntu', undefined],
  ['index.docker.io/library/ubuntu:22.04', 'docker.io/library/ubuntu', '22.04'],
  ['docker/docker', 'docker.io/docker/docker', undefined],
  ['localhost/foo', 'localhost/foo', undefined],
  ['localhost:5000/foo:bar', 'localhost:5000/foo', 'bar'],
];

const invalid = [
  '',
  ':justtag',
  `@sha256:${HEX64}`,
  'Uppercase:tag',
  'test:5000/Uppercase/lowercase:tag',
  `${'a/'.repeat(123)}a:tag`,
  'aa/asdf$$^/aa',
  HEX64,
];

test("every reference of distribution's tests is read as the engine reads it: its registry, its repository normalized, its tag", (t) => {
  for (const [image, repository, tag] of valid) {
    const parsed = imageReference(image);
    t.like(parsed, { repository, tag }, image);
    t.is(registryOf(image), repository.slice(0, repository.indexOf('/')), image);
  }
  t.is(imageReference(`test:5000/repo@sha256:${HEX64}`)?.digest, `sha256:${HEX64}`);
  for (const image of invalid) t.is(imageReference(image), undefined, image);
});

test("index.docker.io and docker.io are one registry: Docker Hub's logins and AGENT_REGISTRIES' docker.io hold for both", (t) => {
  t.is(registryOf('index.docker.io/library/python:3'), 'docker.io');
  t.is(registryOf('python:3'), 'docker.io');
  t.is(registryOf('registry.example.com/bots/telegram:1'), 'registry.example.com');
});

test("the create's schema takes the references the parser reads, and refuses those it refuses by their form", (t) => {
  for (const [image] of valid) t.true(IMAGE_REFERENCE.test(image), image);
  // A name too long is the schema's 255-character bound's; a bare 64-hex name is the engine's to refuse (an image id).
  for (const image of invalid.filter((one) => one !== HEX64 && !one.startsWith('a/a/'))) t.false(IMAGE_REFERENCE.test(image), image);
});
