import { readFile } from 'node:fs/promises';
import test from 'ava';

// One Node for tests, the agent and its image: the version in .node-version (scripts/node.sh fetches it).
const pinned = async () => (await readFile('.node-version', 'utf8')).trim();
const major = (version: string) => version.replace(/^v/, '').split('.')[0];

test('the tests run on the pinned Node', async (t) => {
  t.is(process.version, `v${await pinned()}`);
});

test("the Dockerfile's default base image and package.json's engines name the same Node", async (t) => {
  const version = await pinned();
  const dockerfile = await readFile('Dockerfile', 'utf8');
  t.regex(dockerfile, new RegExp(`^ARG BASE_IMAGE=node:${major(version)}-`, 'm'));
  const { engines } = JSON.parse(await readFile('package.json', 'utf8')) as { engines: { node: string } };
  t.regex(engines.node, new RegExp(`^>=${major(version)}\\.\\d+ <${Number(major(version)) + 1}$`));
});
