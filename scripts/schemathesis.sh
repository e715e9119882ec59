#!/usr/bin/env bash
# An OpenAPI fuzzer nobody here wrote: schemathesis from PyPI, in a virtual
# environment of its own, made once per version and then cached (about 40 s
# cold). Prints the path of its `st` command on the last line.
# Usage: bash scripts/schemathesis.sh
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5
CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}
VENV=$CACHE/schemathesis-$SCHEMATHESIS_VERSION

fail() { echo "schemathesis: $*" >&2; exit 1; }

# A venv knows its own path, so it is built where it stays; .complete marks one whose install finished.
if [ ! -f "$VENV/.complete" ]; then
  PYTHON=$(command -v python3) || fail "needs python3 (Debian: apt-get install python3 python3-venv)"
  echo "schemathesis: installing $SCHEMATHESIS_VERSION from PyPI into $VENV" >&2
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2 \
    || { rm -rf "$VENV"; fail "pip could not install schemathesis==$SCHEMATHESIS_VERSION"; }
  touch "$VENV/.complete"
fi
"$VENV/bin/st" --version >&2
echo "$VENV/bin/st"
