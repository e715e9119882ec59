#!/usr/bin/env bash
# A bot image for the TypeScript client's tests on one runtime (Node of a given version, Bun or Deno,
# scripts/js-runtime.sh): that runtime, the libraries it links, a busybox userland, and the client as a
# bot installs it (npm pack of clients/typescript, unpacked into /app/node_modules/bot-agent-client) with
# test/fixtures/client-check/check.mjs beside it. Imported into the engine under a tag that changes with
# any of them.
# Usage: bash scripts/client-bot-image.sh node|bun|deno VERSION     (prints the tag on the last line)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh
source scripts/rootfs.sh
runtime=${1:?usage: client-bot-image.sh node|bun|deno VERSION}
version=${2:?usage: client-bot-image.sh node|bun|deno VERSION}
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker)
fail() { echo "client-bot-image: $*" >&2; exit 1; }

binary=$(bash scripts/js-runtime.sh "$runtime" "$version" | tail -n 1)
hash=$({
  echo "$runtime $version"
  find clients/typescript -type f ! -path '*/dist/*' ! -path '*/node_modules/*' ! -name '*.tgz' | LC_ALL=C sort | xargs sha256sum
  sha256sum test/fixtures/client-check/check.mjs scripts/client-bot-image.sh scripts/rootfs.sh
} | sha256sum | cut -c1-12)
TAG=bot-agent-client-$runtime:$version-$hash
if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then echo "$TAG"; exit 0; fi
[ -x /bin/busybox ] || fail "needs busybox-static (/bin/busybox)"

root=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$root" "$work"' EXIT
mkdir -p "$root"/{bin,usr/bin,usr/local/bin,tmp,etc,lib64,app/node_modules/bot-agent-client}
chmod 1777 "$root/tmp"
cp "$binary" "$root/usr/local/bin/$runtime"
rootfs_libs "$root" "$binary"
# The client as it is published: built by its own tsconfig, packed by npm, unpacked where npm would put it.
# One build and pack at a time: images for several runtimes are made at once, and a pack that reads the client's
# dist/ while another build rewrites it fails.
exec 9>"${TMPDIR:-/tmp}/bot-agent-client-pack.lock"
flock 9
npx tsc -p clients/typescript >&2 || fail "clients/typescript does not build"
npm pack --silent --ignore-scripts --pack-destination "$work" ./clients/typescript >/dev/null || fail "npm pack of clients/typescript failed"
flock -u 9
tar -xzf "$work"/bot-agent-client-*.tgz -C "$root/app/node_modules/bot-agent-client" --strip-components=1
printf '{ "name": "a-bot", "private": true, "type": "module", "dependencies": { "bot-agent-client": "*" } }\n' >"$root/app/package.json"
cp test/fixtures/client-check/check.mjs "$root/app/check.mjs"
rootfs_busybox "$root"
rootfs_users "$root" bot 10001 /tmp
tar -C "$root" -c . | "$DOCKER" import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -c 'ENV HOME=/tmp' -c 'WORKDIR /app' - "$TAG" >/dev/null
echo "$TAG"
