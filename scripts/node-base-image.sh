#!/usr/bin/env bash
# Makes a local stand-in for the official Node image, for hosts that reach no
# image registry: the project's own Node (scripts/node.sh, the version in
# .node-version, so that the tested image runs what production runs) and npm,
# the libraries they link, a busybox userland and a `node` user (uid 1000),
# imported into the engine.
# Usage: bash scripts/node-base-image.sh [TAG]     (prints the tag)
set -euo pipefail
source "$(dirname "$0")/node-env.sh"
source "$(dirname "$0")/rootfs.sh"

TAG=${1:-bot-agent-node-base:$(node --version | tr -d v)}
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker)
if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then echo "$TAG"; exit 0; fi

node=$(readlink -f "$(command -v node)")
npm_dir=$(readlink -f "$(dirname "$(readlink -f "$(command -v npm)")")/..")
[ -f "$npm_dir/bin/npm-cli.js" ] || { echo "node-base-image: npm not found beside $node" >&2; exit 1; }
[ -x /bin/busybox ] || { echo "node-base-image: needs busybox-static (/bin/busybox)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,usr/bin,usr/local/lib/node_modules,etc/ssl/certs,tmp,home/node,lib64}
chmod 1777 "$root/tmp"
cp "$node" "$root/usr/bin/node"
cp -r "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -s ../local/lib/node_modules/npm/bin/npm-cli.js "$root/usr/bin/npm"
ln -s ../local/lib/node_modules/npm/bin/npx-cli.js "$root/usr/bin/npx"
rootfs_libs "$root" "$node"
rootfs_busybox "$root"
ln -s /bin/busybox "$root/usr/bin/env"
rootfs_users "$root" node 1000 /home/node
chown 1000:1000 "$root/home/node"
tar -C "$root" -c . | "$DOCKER" import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -c 'CMD ["node"]' - "$TAG" >/dev/null
echo "$TAG"
