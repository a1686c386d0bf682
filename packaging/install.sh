#!/usr/bin/env bash
# Installs Ringcast where a systemd machine expects it: the binary, the dashboard, a default config
# (never over one that is there), the unit and the docs. `make install` calls it; so does deb.sh.
# Environment: BIN (the executable), DESTDIR (a staging root), PREFIX (default /usr/local),
# SYSCONFDIR (/etc), BINDIR, DATADIR, DOCDIR, MANDIR, UNITDIR (default PREFIX/lib/systemd/system).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$root/.build/dist/release/ringcast}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
SYSCONFDIR=${SYSCONFDIR:-/etc}
BINDIR=${BINDIR:-$PREFIX/bin}
DATADIR=${DATADIR:-$PREFIX/share}
DOCDIR=${DOCDIR:-$DATADIR/doc/ringcast}
MANDIR=${MANDIR:-$DATADIR/man}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
[ -x "$BIN" ] || { echo "install: no executable at $BIN: build it first (make install builds it)" >&2; exit 1; }

# Templates name the installed paths, never the staging root: the tree works once copied to /.
version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' "$root/Sources/RingcastCore/Protocol/Version.swift")
fill() {
  sed -e "s|@BINDIR@|$BINDIR|g" -e "s|@DATADIR@|$DATADIR|g" -e "s|@DOCDIR@|$DOCDIR|g" \
      -e "s|@SYSCONFDIR@|$SYSCONFDIR|g" -e "s|@VERSION@|$version|g" "$1"
}

install -d -m 0755 "$DESTDIR$BINDIR" "$DESTDIR$DATADIR/ringcast" "$DESTDIR$DOCDIR" "$DESTDIR$MANDIR/man1" "$DESTDIR$UNITDIR" \
  "$DESTDIR$SYSCONFDIR/ringcast"
install -m 0755 "$BIN" "$DESTDIR$BINDIR/ringcast"

# The dashboard, files 0644 and folders 0755 whatever the checkout's modes.
rm -rf "$DESTDIR$DATADIR/ringcast/Public"
(cd "$root" && find Public -type d) | while read -r folder; do install -d -m 0755 "$DESTDIR$DATADIR/ringcast/$folder"; done
(cd "$root" && find Public -type f) | while read -r file; do install -m 0644 "$root/$file" "$DESTDIR$DATADIR/ringcast/$file"; done

config="$DESTDIR$SYSCONFDIR/ringcast/config.json"
if [ -e "$config" ]; then
  echo "install: kept $config (the new default is $config.default)"
  fill "$root/packaging/config.json.in" > "$config.default"
  chmod 0644 "$config.default"
else
  fill "$root/packaging/config.json.in" > "$config"
  chmod 0644 "$config"
fi

fill "$root/packaging/ringcast.service.in" > "$DESTDIR$UNITDIR/ringcast.service"
chmod 0644 "$DESTDIR$UNITDIR/ringcast.service"

fill "$root/packaging/ringcast.1.in" | gzip -9n > "$DESTDIR$MANDIR/man1/ringcast.1.gz"
chmod 0644 "$DESTDIR$MANDIR/man1/ringcast.1.gz"

for doc in README.md docs/CONFIG.md docs/PROTOCOL.md docs/grafana-dashboard.json; do
  install -m 0644 "$root/$doc" "$DESTDIR$DOCDIR/$(basename "$doc")"
done
echo "install: ringcast in ${DESTDIR:-/} (binary $BINDIR/ringcast, unit $UNITDIR/ringcast.service, config $SYSCONFDIR/ringcast/config.json)"
