#!/usr/bin/env bash
# Prints the folder of the project's Node (the version in .node-version: bin/ and include/),
# fetched once from the npm registry (the node-linux-<arch> package holds the
# official binary) into a cache keyed by version: about 50 MB, 2 s here.
# scripts/node-env.sh puts it first on PATH, so that npm, tsc, ava and the
# agent run on it whatever Node the machine has.
# Usage: bash scripts/node.sh [VERSION]   (another version, e.g. for the client's tests on Node 20 and 22)
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-$(tr -d ' \n' <.node-version)}
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "node.sh: no Node package for $(uname -m)" >&2; exit 1 ;;
esac
cache=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}
dir="$cache/node-v$version-linux-$arch"

if [ ! -x "$dir/bin/node" ]; then
  echo "node.sh: fetching Node $version (node-linux-$arch from the npm registry) into $dir" >&2
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.node-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "node-linux-$arch@$version" >/dev/null)
  mkdir "$work/unpacked"
  # include/: Node's headers, for native addons built at install (npm_config_nodedir, see node-env.sh).
  tar -xzf "$work"/node-linux-*.tgz -C "$work/unpacked" --strip-components=1 package/bin package/include package/LICENSE
  # Moved into place whole; when another run got there first, its copy is kept.
  mv -T "$work/unpacked" "$dir" 2>/dev/null || [ -x "$dir/bin/node" ]
fi
[ -d "$dir/include/node" ] && [ "$("$dir/bin/node" --version)" = "v$version" ] || { echo "node.sh: $dir is not a whole Node $version" >&2; exit 1; }
echo "$dir"
