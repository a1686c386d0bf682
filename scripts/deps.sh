#!/usr/bin/env bash
# Installs the Debian packages Ringcast builds and tests with, only those missing.
# Usage: scripts/deps.sh [build|test|deb]   (test adds what the browser tests need: browser-deps.sh;
# test and deb add what checks the installed tree and builds the package: systemd-analyze, dpkg-dev, lintian)
set -euo pipefail
mode=${1:-build}

# libev-dev and libwebsockets-evlib-ev come with libwebsockets-dev; named for the loop lws runs on.
packages=(pkg-config libwebsockets-dev libev-dev libwebsockets-evlib-ev libsqlite3-dev libhiredis-dev libcurl4-openssl-dev libssl-dev)
if [ "$mode" = test ]; then
  packages+=(procps iproute2 openssl curl redis-server redis-sentinel bsdutils util-linux nginx tinyproxy)
fi
if [ "$mode" = test ] || [ "$mode" = deb ]; then
  packages+=(systemd dpkg-dev binutils lintian)
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  [ "$(id -u)" = 0 ] && sudo= || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1 && [ ! -x /opt/swift/usr/bin/swift ]; then
  echo "swift is not on PATH: install the Swift toolchain (swift.org) and put its usr/bin on PATH" >&2
  exit 1
fi

if [ "$mode" = test ]; then
  "$(dirname "$0")/browser-deps.sh"
fi
