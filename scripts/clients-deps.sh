#!/usr/bin/env bash
# Installs what the client tests need, only what is missing (safe to run again): the virtual
# environment VENV (default .build/clients-venv) from python3 -m venv, with the Python package
# installed from this checkout and its test extra (pytest and tqdm from PyPI), installed again each
# run so the tests see the checkout as it is now; and from Debian, Node (when there is none, or
# one older than 18) and node-progress, the real progress bar the Node module's tests mirror.
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

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
missing=()
[ "$(node_major)" -ge 18 ] || missing+=(nodejs)
[ -f /usr/share/nodejs/progress/package.json ] || missing+=(node-progress)
if [ ${#missing[@]} -gt 0 ]; then
  echo "clients-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$(node_major)" -lt 18 ]; then
  echo "clients-deps: the Node module's tests need Node 18 or later; found $(node --version 2>/dev/null || echo none)" >&2
  exit 1
fi
