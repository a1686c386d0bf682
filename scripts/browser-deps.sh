#!/usr/bin/env bash
# Installs what the browser tests need, only what is missing (safe to run again):
# Chromium and chromedriver from Debian's packages, selenium, pytest and axe-selenium-python from PyPI, and PyJWT,
# which mints the signed tokens the access tests (Swift and browser) present: a real JWT library,
# not the server's own code; and authlib (with joserfc), on which Tests/oidc/provider.py builds the
# OpenID Connect provider the sign-in tests use.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 && SUDO="sudo"
fi

missing=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || [ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  echo "browser-deps: installing ${missing[*]}"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${missing[@]}"
fi

PYTHON="${PYTHON:-python3}"
pip_missing=()
"$PYTHON" -c 'import selenium' >/dev/null 2>&1 || pip_missing+=(selenium)
"$PYTHON" -c 'import pytest' >/dev/null 2>&1 || pip_missing+=(pytest)
"$PYTHON" -c 'import jwt; jwt.encode' >/dev/null 2>&1 || pip_missing+=(pyjwt)
"$PYTHON" -c 'import authlib, joserfc' >/dev/null 2>&1 || pip_missing+=(authlib)
# axe-core, the accessibility engine Tests/browser/test_accessibility.py runs, comes with it.
"$PYTHON" -c 'import axe_selenium_python' >/dev/null 2>&1 || pip_missing+=(axe-selenium-python)
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "browser-deps: pip installing ${pip_missing[*]}"
  if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y python3-pip
  fi
  # Debian's own python refuses plain pip installs (PEP 668); fall back to the documented override.
  "$PYTHON" -m pip install --quiet "${pip_missing[@]}" \
    || "$PYTHON" -m pip install --quiet --break-system-packages "${pip_missing[@]}"
fi
