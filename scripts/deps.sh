#!/usr/bin/env bash
# Installs what msr needs to build, test and run its lab on a fresh Debian
# machine, and nothing when it is all there already. Idempotent.
set -euo pipefail

packages=(
	clang llvm libbpf-dev     # BPF C to objects (bpf2go calls clang)
	iproute2 ethtool          # the lab: namespaces, veths, bridges, offloads
	util-linux procps         # nsenter, sysctl
	iputils-ping traceroute   # clients in the tests
	iperf3                    # TCP through the whole router (msr demo)
	nginx-light curl          # a web server and its client across the router (tests)
	vsftpd tnftp              # an FTP server and client (seed 002's transfers)
	tcpdump                   # order of the segments into and out of the router (tests)
	bird2 frr frr-snmp        # the VCP's routing suite (frr-snmp: BGP4-MIB); FRR as external peers
	keepalived                # VRRP: which VCP is active (hot standby)
	snmpd snmp snmptrapd      # SNMP: the VCP's master agent; clients and a trap receiver (tests)
	prometheus                # msr demo up --monitoring: scrapes every agent (tests)
	chromium                  # the web view's test: a real browser, headless
	python3                   # a client that sends IPv6 with Hop-by-Hop options (tests)
	ndisc6                    # rdisc6: a router solicitation and the advertisement it gets (tests)
	stress-ng                 # make test-stress: a CPU hog beside the tests
	python3-scapy hping3      # hostile neighbours: forged ARP and NDP, floods (tests)
	fping                     # the large lab's ping matrix: one process a host (tests)
	tshark pmacct             # sFlow: Wireshark's decoder, pmacct's collector (tests)
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


# A real Internet routing table for FIB tests and benchmarks (DESIGN.md
# §7): RouteViews snapshots shipped by Debian's python3-pyasn (MIT). Only
# the data files are kept; the package is not installed.
pyasn_dir=/var/cache/msr/pyasn
if [ ! -s "$pyasn_dir/ipasn_20140513.dat.gz" ]; then
	echo "deps: fetching RouteViews tables from python3-pyasn"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -qq python3-pyasn >/dev/null 2>&1 || { apt-get update -qq && apt-get download -qq python3-pyasn; })
	dpkg-deb -x "$tmp"/python3-pyasn_*.deb "$tmp/x"
	mkdir -p "$pyasn_dir"
	cp "$tmp"/x/usr/lib/python3/dist-packages/data/ipasn_20140513.dat.gz "$tmp"/x/usr/lib/python3/dist-packages/data/ipasn6_20151101.dat.gz "$pyasn_dir/"
	rm -rf "$tmp"
fi

go mod download
