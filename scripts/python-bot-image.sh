#!/usr/bin/env bash
# A bot image for the Python client's tests, as scripts/node-base-image.sh makes one for Node: the
# machine's own python3 and its standard library, the libraries they link, a busybox userland, pytest
# and httpx (PyPI, in a venv made once per version and cached: about 20 s cold, mypy with them), and the
# client itself, installed by pip from clients/python, with its tests in /opt/bot-agent-python. Imported
# into the engine under a tag that changes with any of them.
# Usage: bash scripts/python-bot-image.sh          (prints the tag on the last line)
#        bash scripts/python-bot-image.sh --venv   (only the venv: prints its path, for mypy on the host)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/rootfs.sh

PYTEST_VERSION=8.4.2
HTTPX_VERSION=0.28.1
SETUPTOOLS_VERSION=80.9.0
MYPY_VERSION=1.18.2
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker)
fail() { echo "python-bot-image: $*" >&2; exit 1; }

PYTHON=$(command -v python3) || fail "needs python3 (Debian: apt-get install python3 python3-venv)"
read -r real version stdlib < <("$PYTHON" -c 'import os, sys, sysconfig; print(os.path.realpath(sys.executable), "%d.%d" % sys.version_info[:2], sysconfig.get_paths()["stdlib"])')
CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}
VENV=$CACHE/python-bot-deps-$version-pytest$PYTEST_VERSION-httpx$HTTPX_VERSION-mypy$MYPY_VERSION
# Test files ask for it at once: one of them builds, the others wait and find it made.
mkdir -p "$CACHE"
exec 9>"$CACHE/python-bot-image.lock"
flock 9
if [ ! -f "$VENV/.complete" ]; then
  echo "python-bot-image: installing pytest $PYTEST_VERSION, httpx $HTTPX_VERSION and mypy $MYPY_VERSION from PyPI into $VENV" >&2
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION" "httpx==$HTTPX_VERSION" "setuptools==$SETUPTOOLS_VERSION" \
    "mypy==$MYPY_VERSION" >&2 || { rm -rf "$VENV"; fail "pip could not install pytest, httpx, setuptools and mypy"; }
  touch "$VENV/.complete"
fi
if [ "${1:-}" = --venv ]; then echo "$VENV"; exit 0; fi

hash=$({
  echo "$real $version $PYTEST_VERSION $HTTPX_VERSION"
  find clients/python -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' ! -path '*/build/*' ! -path '*/.pytest_cache/*' | LC_ALL=C sort | xargs sha256sum
  sha256sum scripts/python-bot-image.sh scripts/rootfs.sh
} | sha256sum | cut -c1-12)
TAG=bot-agent-python:$hash
if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then echo "$TAG"; exit 0; fi
[ -x /bin/busybox ] || fail "needs busybox-static (/bin/busybox)"

root=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$root" "$work"' EXIT
lib=$root/usr/local/lib/python$version
mkdir -p "$root"/{bin,usr/bin,usr/local/bin,tmp,etc,lib64,opt/bot-agent-python} "$lib/site-packages"
chmod 1777 "$root/tmp"
cp "$real" "$root/usr/local/bin/python$version"
ln -s "python$version" "$root/usr/local/bin/python3"
# The standard library, without what a bot never runs (its own tests, Tk, IDLE) or another interpreter's packages.
tar -C "$stdlib" --exclude=./site-packages --exclude=./dist-packages --exclude=./test --exclude=./idlelib \
  --exclude=./tkinter --exclude=./turtledemo --exclude=./ensurepip -c . | tar -C "$lib" -x
# The libraries python and its extension modules link.
rootfs_libs "$root" "$real" "$lib"/lib-dynload/*.so
# pytest and httpx with what they need, then the client as a user installs it: pip, from its pyproject.toml.
(cd "$VENV/lib/python$version/site-packages" && tar --exclude='./pip*' --exclude='./setuptools*' --exclude=./_distutils_hack --exclude='./mypy*' \
  --exclude=./pkg_resources --exclude=./distutils-precedence.pth -c .) | tar -C "$lib/site-packages" -x
cp -r clients/python "$work/client"
rm -rf "$work/client/build" "$work/client"/src/*.egg-info
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation --target "$lib/site-packages" "$work/client" >&2 \
  || fail "pip could not install clients/python"
cp -r clients/python/tests clients/python/pyproject.toml "$root/opt/bot-agent-python/"
rootfs_busybox "$root"
rootfs_users "$root" bot 10001 /tmp
tar -C "$root" -c . | "$DOCKER" import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -c 'ENV PYTHONDONTWRITEBYTECODE=1' \
  -c 'WORKDIR /opt/bot-agent-python' -c 'CMD ["python3"]' - "$TAG" >/dev/null
echo "$TAG"
