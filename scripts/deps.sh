#!/usr/bin/env bash
# Installs what msr needs to build, test and run its lab on a fresh Debian
# machine, and nothing when it is all there already. Idempotent.
set -euo pipefail

packages=(
	clang llvm libbpf-dev     # BPF C to objects (bpf2go calls clang)
	iproute2 ethtool          # the lab: namespaces, veths, bridges, offloads
	util-linux procps         # nsenter, sysctl
	iputils-ping traceroute   # clients in the tests
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: need root to apt-get install; run as root (the lab needs root anyway)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi


go mod download
