#!/usr/bin/env bash
# Debian's Chromium for the console's browser tests (playwright-core drives it; its own browser downloads
# cannot work without the internet). Installed with apt when missing (about 100 MB, a minute or two);
# prints the browser's path.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium: installing Debian's chromium package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends chromium >&2 || { apt-get update >&2 && apt-get install -y --no-install-recommends chromium >&2; }
fi
command -v chromium
