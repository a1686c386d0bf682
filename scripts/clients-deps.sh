#!/usr/bin/env bash
# Makes the virtual environment the client tests run in (safe to run again): VENV (default
# .build/clients-venv) from python3 -m venv, the Python package installed from this checkout with
# its test extra (pytest and tqdm from PyPI), installed again each run so the tests see the
# checkout as it is now. Checks that Node (18 or later) is there for the Node module's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.build/clients-venv}
[ "$(id -u)" = 0 ] && sudo= || sudo=sudo

if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's own python3 keeps venv in a package of its own.
    echo "clients-deps: installing python3-venv"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
"${pip[@]}" install "./clients/python[test]"
"${pip[@]}" install --force-reinstall --no-deps ./clients/python

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 18 ]; then
  echo "clients-deps: the Node module's tests need Node 18 or later (found: $(node --version 2>/dev/null || echo none)); scripts/deps.sh test installs Debian's nodejs" >&2
  exit 1
fi
