#!/usr/bin/env bash
# Builds the msr Debian package: a statically linked msr, the systemd
# units, the docs they point at, example configs and bash completion.
# Usage: scripts/deb.sh OUTDIR [VERSION]   (make deb)
set -euo pipefail
out=${1:?usage: scripts/deb.sh OUTDIR [VERSION]}
cd "$(dirname "$0")/.."
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# Debian versions start with a digit: 0.0~git<date>.<short commit>, or the
# tag without its v.
version=${2:-$(git describe --tags --exact-match 2>/dev/null | sed 's/^v//' || true)}
if [ -z "$version" ]; then
	version="0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d).$(git rev-parse --short HEAD 2>/dev/null || echo 0)"
fi
arch=$(dpkg --print-architecture)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/usr/share/doc/msr" \
	"$root/usr/share/msr/examples" "$root/usr/share/bash-completion/completions"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version -X main.commit=$commit" -o "$root/usr/bin/msr" ./cmd/msr
install -m 644 deploy/systemd/*.service "$root/lib/systemd/system/"
install -m 644 docs/*.md README.md "$root/usr/share/doc/msr/"
install -m 644 deploy/examples/*.yaml "$root/usr/share/msr/examples/"
install -m 644 deploy/grafana/msr-router.json "$root/usr/share/msr/"
"$root/usr/bin/msr" completion bash > "$root/usr/share/bash-completion/completions/msr"
cat > "$root/usr/share/doc/msr/copyright" <<'COPY'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: msr
Files: *
License: see the msr repository
COPY
size=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: msr
Version: $version
Architecture: $arch
Maintainer: msr developers <msr@example.net>
Installed-Size: $size
Depends: iproute2
Recommends: bird2 | frr, keepalived, snmpd
Suggests: prometheus
Section: net
Priority: optional
Homepage: https://github.com/msr-router/msr
Description: multi-stage software router
 Many commodity Linux hosts that together behave as one IP router: XDP load
 balancers spread packets over back-end routers through an Ethernet switch,
 and a virtual control plane (BIRD or FRR) makes them one box to their
 neighbours and to the operator. One binary, msr; one systemd unit per
 element kind (msr-lb@, msr-router@, msr-vcp@).
CONTROL
mkdir -p "$out"
deb="$out/msr_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
