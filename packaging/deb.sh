#!/usr/bin/env bash
# Builds the Debian package with dpkg-deb from the tree packaging/install.sh makes (PREFIX=/usr):
# OUT/ringcast_VERSION_ARCH.deb, the version read from Sources/RingcastCore/Protocol/Version.swift.
# Environment: BIN (the executable: a release build with the Swift runtime linked in, as `make deb`
# builds it), OUT (default dist), MAINTAINER.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$root/.build/dist/release/ringcast}
OUT=${OUT:-$root/dist}
MAINTAINER=${MAINTAINER:-Ringcast Developers <dev@ringcast.invalid>}
version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' "$root/Sources/RingcastCore/Protocol/Version.swift")
arch=$(dpkg --print-architecture)
[ -n "$version" ] || { echo "deb: no version in Sources/RingcastCore/Protocol/Version.swift" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/debian/ringcast
DESTDIR=$stage PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system BIN=$BIN "$root/packaging/install.sh" >/dev/null
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/ringcast"

doc=$stage/usr/share/doc/ringcast
install -m 0644 "$root/packaging/debian/copyright" "$doc/copyright"
install -d -m 0755 "$stage/usr/share/lintian/overrides"
install -m 0644 "$root/packaging/debian/lintian-overrides" "$stage/usr/share/lintian/overrides/ringcast"
{
  echo "ringcast ($version) unstable; urgency=medium"
  echo
  echo "  * Ringcast $version, packaged from the source tree."
  echo
  echo " -- $MAINTAINER  $(date -R -d "@$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Depends: what the binary links, as dpkg-shlibdeps finds it (it wants a debian/control to stand in),
# and the libev plugin libwebsockets loads at run time (dlopen, so shlibdeps cannot see it).
printf 'Source: ringcast\n\nPackage: ringcast\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O -e"debian/ringcast/usr/bin/ringcast" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')

install -d -m 0755 "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: ringcast
Version: $version
Architecture: $arch
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends, libwebsockets-evlib-ev, init-system-helpers (>= 1.54~)
Section: net
Priority: optional
Description: live-progress server: services push progress, browsers watch it
 Ringcast serves a dashboard, a WebSocket push stream and an HTTP API on one
 port. Services publish progress with curl, the ringcast command line, a
 Swift client or a WebSocket; browsers watch rings fill, spinners spin and
 countdowns tick, live and across restarts.
 .
 The package runs it as a systemd service (ringcast.service) with its own
 user and its state in /var/lib/ringcast.
CONTROL
echo /etc/ringcast/config.json > "$stage/DEBIAN/conffiles"
for script in postinst prerm postrm; do install -m 0755 "$root/packaging/debian/$script" "$stage/DEBIAN/$script"; done
(cd "$stage" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

mkdir -p "$OUT"
package="$OUT/ringcast_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$package" >/dev/null
echo "$package"
