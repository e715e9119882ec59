# Sourced by the scripts that build a Go tool from Go modules once per version into a cache (s3.sh,
# promtool.sh, victorialogs.sh): `go_install_cached NAME CACHE BINARY PACKAGE@VERSION` builds PACKAGE into
# the folder CACHE unless CACHE/BINARY is there already. Needs Go 1.24 or newer on PATH.
go_install_cached() {
  local name=$1 cache=$2 binary=$3 package=$4 work started
  [ -x "$cache/$binary" ] && return 0
  command -v go >/dev/null 2>&1 || { echo "$name: needs Go (1.24 or newer) on PATH" >&2; return 1; }
  mkdir -p "$(dirname "$cache")"
  work=$(mktemp -d "$(dirname "$cache")/.$binary-build-XXXXXX")
  started=$(date +%s)
  echo "$name: building $package into $cache" >&2
  if ! GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$work/out" go install -trimpath -ldflags="-s -w" "$package" >&2; then
    rm -rf "$work"
    echo "$name: go install of $package failed" >&2
    return 1
  fi
  # Another build of the same version may have finished first: its copy is as good.
  mv -T "$work/out" "$cache" 2>/dev/null || [ -x "$cache/$binary" ]
  rm -rf "$work"
  echo "$name: built in $(( $(date +%s) - started )) s" >&2
}
