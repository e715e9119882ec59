import test from 'ava';
import { pinnedImage } from '../../src/runtime/docker/docker-provisioner.js';

// A move names the image by the digest its registry gave it (docs/api.md §17), so that the other node pulls that very image.
const digest = `sha256:${'ab'.repeat(32)}`;

test('an image with a registry digest of its repository is named by it, whatever its tag', (t) => {
  t.is(pinnedImage('127.0.0.1:5000/bots/echo:v1', [`127.0.0.1:5000/bots/echo@${digest}`]), `127.0.0.1:5000/bots/echo@${digest}`);
  t.is(pinnedImage('127.0.0.1:5000/bots/echo', [`127.0.0.1:5000/bots/echo@${digest}`]), `127.0.0.1:5000/bots/echo@${digest}`);
  t.is(pinnedImage('busybox:1.36', [`other@${digest}`, `busybox@${digest}`]), `busybox@${digest}`);
  // The engine writes Docker Hub's digests by their familiar name, whatever name the bot was made with.
  t.is(pinnedImage('index.docker.io/library/busybox:1.36', [`busybox@${digest}`]), `busybox@${digest}`);
  t.is(pinnedImage('docker.io/library/busybox', [`library/busybox@${digest}`]), `library/busybox@${digest}`);
});

test('an image without one of its repository, or named by digest already, is named as it was', (t) => {
  t.is(pinnedImage('bot-agent-test:latest', []), 'bot-agent-test:latest');
  t.is(pinnedImage('127.0.0.1:5000/bots/echo:v1', [`127.0.0.1:5000/bots/echo-other@${digest}`]), '127.0.0.1:5000/bots/echo:v1');
  t.is(pinnedImage(`registry/x@${digest}`, [`registry/x@sha256:${'cd'.repeat(32)}`]), `registry/x@${digest}`);
});
