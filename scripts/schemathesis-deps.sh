#!/usr/bin/env bash
# Installs schemathesis from PyPI for `make test-schemathesis`, only when it is missing or older than
# the 4.32 whose command line Tests/schemathesis/run.py uses (safe to run again). Fuzzing (make fuzz)
# needs nothing beyond the Swift toolchain, which ships libFuzzer, AddressSanitizer and lld.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 && SUDO="sudo"
fi
PYTHON="${PYTHON:-python3}"
if "$PYTHON" - <<'CHECK' >/dev/null 2>&1
import schemathesis, sys
major, minor = (int(part) for part in schemathesis.__version__.split(".")[:2])
sys.exit(0 if (major, minor) >= (4, 32) and major < 5 else 1)
CHECK
then
  exit 0
fi
echo "schemathesis-deps: pip installing schemathesis"
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y python3-pip
fi
# Debian's own python refuses plain pip installs (PEP 668); fall back to the documented override.
"$PYTHON" -m pip install --quiet "schemathesis>=4.32,<5" \
  || "$PYTHON" -m pip install --quiet --break-system-packages "schemathesis>=4.32,<5"
