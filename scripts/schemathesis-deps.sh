#!/usr/bin/env bash
# Installs schemathesis 4.x (4.32 or later: Tests/schemathesis/run.py uses its command line) from
# PyPI when it is missing, for `make test-schemathesis`; safe to run again. Fuzzing (make fuzz) needs
# nothing beyond the Swift toolchain, which ships libFuzzer, AddressSanitizer and lld.
set -euo pipefail
PYTHON=${PYTHON:-python3}
spec="schemathesis>=4.32,<5"
"$PYTHON" -c 'import schemathesis, sys; v = tuple(int(p) for p in schemathesis.__version__.split(".")[:2]); sys.exit(not (4, 32) <= v < (5, 0))' \
  >/dev/null 2>&1 && exit 0

echo "schemathesis-deps: installing $spec"
[ "$(id -u)" = 0 ] && sudo= || sudo=sudo
"$PYTHON" -m pip --version >/dev/null 2>&1 || { $sudo apt-get update -qq; DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip; }
install=("$PYTHON" -m pip install --quiet "$spec")
# Debian's own python refuses plain pip installs (PEP 668); then the documented override.
"${install[@]}" || "${install[@]}" --break-system-packages
