#!/usr/bin/env bash
# Installs ruff from PyPI when it is missing (make lint runs it over the Python in the tree).
set -euo pipefail
if ! python3 -m ruff --version >/dev/null 2>&1 && ! command -v ruff >/dev/null 2>&1; then
  echo "lint-deps: pip installing ruff"
  python3 -m pip install -q --disable-pip-version-check "ruff>=0.6,<1" 2>&1 | grep -v "Running pip as the 'root' user" || true
fi
