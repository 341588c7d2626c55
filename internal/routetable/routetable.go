// Package routetable loads and grows routing tables for FIBs, labs and
// benchmarks: Debian's python3-pyasn RouteViews snapshots (pyasn's
// "prefix<TAB>asn" format), tables cut from them, and tables grown beyond
// them with their prefix-length mix, IPv4 (Named) and IPv6 (Named6). The
// back-end, the VCP (static route files) and the benchmarks share it.
package routetable

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Dir is where scripts/deps.sh puts Debian's python3-pyasn RouteViews
// snapshots.
const Dir = "/var/cache/msr/pyasn"

// PyASN is the 2014-05-13 RouteViews snapshot: 512,621 IPv4 prefixes.
const PyASN = Dir + "/ipasn_20140513.dat.gz"

// PyASN6 is the 2015-11-01 RouteViews snapshot's IPv6 half: 27,693
// prefixes (the file holds the IPv4 table of that day too).
const PyASN6 = Dir + "/ipasn6_20151101.dat.gz"

// Load reads a pyasn .dat(.gz) file ("prefix<TAB>asn" lines, ';'
// comments) and returns its IPv4 prefixes, de-duplicated.
func Load(path string) ([]netip.Prefix, error) { return load(path, netip.Addr.Is4) }

// Load6 is Load for the file's IPv6 prefixes.
func Load6(path string) ([]netip.Prefix, error) { return load(path, netip.Addr.Is6) }

// load reads the prefixes of a pyasn file whose address family keeps.
func load(path string, family func(netip.Addr) bool) ([]netip.Prefix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("routing table: %w (scripts/deps.sh fetches it)", err)
	}
	defer f.Close()
	var sc *bufio.Scanner
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("routing table %s: %w", path, err)
		}
		sc = bufio.NewScanner(z)
	} else {
		sc = bufio.NewScanner(f)
	}
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if t == "" || t[0] == ';' {
			continue
		}
		field, _, _ := strings.Cut(t, "\t")
		p, err := netip.ParsePrefix(field)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if p = p.Masked(); family(p.Addr()) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// Synthesize returns n distinct prefixes with the length distribution of
// base (a real table): it keeps base and adds random prefixes of lengths
// drawn from it, so a 1M-route table looks like a grown Internet table
// (unicast space only: first octets 1–223, not 127).
func Synthesize(base []netip.Prefix, n int, seed uint64) []netip.Prefix {
	return grow(base, n, seed, func(r *rand.Rand, _ int, _ []netip.Prefix) (netip.Addr, bool) {
		a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		return a, !a.IsLoopback() // no routing suite takes 127/8
	})
}

// grow is base and random prefixes beyond it, n in all, distinct, of
// lengths drawn from base, at addresses random gives for a length and the
// table grown so far (false: draw again).
func grow(base []netip.Prefix, n int, seed uint64, random func(r *rand.Rand, bits int, table []netip.Prefix) (netip.Addr, bool)) []netip.Prefix {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := make(map[netip.Prefix]bool, n)
	out := make([]netip.Prefix, 0, n)
	for _, p := range base {
		if len(out) == n {
			return out
		}
		seen[p] = true
		out = append(out, p)
	}
	for len(out) < n {
		l := base[r.IntN(len(base))].Bits()
		a, ok := random(r, l, out)
		if p, _ := a.Prefix(l); ok && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Named returns the table a --fib value names: "pyasn" (the RouteViews
// snapshot), a number of prefixes (cut evenly from the snapshot, or grown
// beyond it), or a pyasn-format file; nil for "".
func Named(name string) ([]netip.Prefix, error) {
	switch {
	case name == "":
		return nil, nil
	case name == "pyasn":
		return Load(PyASN)
	}
	if n, err := strconv.Atoi(name); err == nil {
		if n < 1 || n > 4_000_000 {
			return nil, fmt.Errorf("--fib %d: 1 to 4,000,000 prefixes", n)
		}
		base, err := Load(PyASN)
		if err != nil {
			return nil, err
		}
		return cutOrGrow(base, n, Synthesize), nil
	}
	if IsIPv6(name) {
		return nil, fmt.Errorf("--fib %q: an IPv6 table, and this FIB is IPv4's (bench: --ipv6)", name)
	}
	if _, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("--fib %q: pyasn, a number of prefixes, or a pyasn-format file", name)
	}
	return Load(name)
}

// cutOrGrow is n prefixes of base: cut evenly from it, or grown beyond it
// by grow.
func cutOrGrow(base []netip.Prefix, n int, grow func([]netip.Prefix, int, uint64) []netip.Prefix) []netip.Prefix {
	if n > len(base) {
		return grow(base, n, 1)
	}
	// Spread the cut over the whole table, not its first rows.
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = base[i*len(base)/n]
	}
	return out
}

// Synthesize6 grows an IPv6 table as the Internet's grows: base (a real
// table) and new prefixes of lengths drawn from it, each placed where
// address space is handed out, beside a prefix already in the table (the
// snapshot's or one grown before it). One longer than /32 (a site, /48,
// or an LIR's sub-allocation) goes in the /32 of such a prefix (the RIRs'
// minimum LIR allocation); one of /32 or shorter (a new allocation) in its
// /12 (the blocks IANA gives the RIRs:
// iana.org/assignments/ipv6-unicast-address-assignments).
//
// That placement is measured, not assumed: in the 2015 snapshot 96% of
// the /48s share their /32 with another prefix and the FIB needs 0.45
// 256-entry groups a prefix past its first 16 bits; 250,000 grown this
// way give 98% and 0.89, where uniformly random addresses (Spread6) give
// 11% and 2.23 (TestIPv6Table, docs/benchmarks.md).
//
// The mix of lengths is today's: the snapshot's mean length is 42.9 bits
// (/48 44% of it, /32 26%, /33–/44 22%), where the IPv6 tables of 2024–25
// average 42.8–43.2 (bgp.potaroo.net/v6/as6447: 226,415 entries, average
// 43.24, 2024-10-23; bgp.potaroo.net/v6/as2.0: 219,475, average 42.84,
// 2025-03-07); so a table grown with it to 250,000 is a full IPv6 table of
// today's shape.
func Synthesize6(base []netip.Prefix, n int, seed uint64) []netip.Prefix {
	return grow(base, n, seed, func(r *rand.Rand, bits int, table []netip.Prefix) (netip.Addr, bool) {
		q := table[r.IntN(len(table))]
		if q.Addr().As16()[0]&0xe0 != 0x20 {
			return netip.Addr{}, false // beside global unicast space (2000::/3) only
		}
		region := min(q.Bits(), 32)
		if bits <= 32 {
			region = min(q.Bits(), 12)
		}
		return randomIn(r, q.Addr(), region), true
	})
}

// Spread6 grows an IPv6 table with uniformly random addresses in global
// unicast space (2000::/3), lengths drawn from base: a worst case for a
// trie, every new prefix a path of its own (table names Nv6u).
func Spread6(base []netip.Prefix, n int, seed uint64) []netip.Prefix {
	return grow(base, n, seed, func(r *rand.Rand, _ int, _ []netip.Prefix) (netip.Addr, bool) {
		return randomIn(r, netip.IPv6Unspecified(), 0), true
	})
}

// randomIn is an address in global unicast space (2000::/3) whose first
// bits are a's, the rest random.
func randomIn(r *rand.Rand, a netip.Addr, bits int) netip.Addr {
	b := a.As16()
	for i := range b {
		kept := min(max(bits-8*i, 0), 8) // of a's bits, in byte i
		keep := byte(0xff << (8 - kept))
		b[i] = b[i]&keep | byte(r.IntN(256))&^keep
	}
	if bits < 3 {
		b[0] = 0x20 | b[0]&0x1f // 2000::/3
	}
	return netip.AddrFrom16(b)
}

// IsIPv6 says whether a table name is an IPv6 table's (Named6's): pyasn6,
// Nv6 or Nv6u.
func IsIPv6(name string) bool {
	return name == "pyasn6" || strings.HasSuffix(name, "v6") || strings.HasSuffix(name, "v6u")
}

// Named6 is Named for IPv6: "pyasn6" (the 2015 snapshot's IPv6 table),
// "Nv6" (N prefixes, cut from it or grown beyond it by Synthesize6:
// 250000v6 is a full table of today), "Nv6u" (grown by Spread6, the worst
// case), or a pyasn-format file's IPv6 prefixes; nil for "".
func Named6(name string) ([]netip.Prefix, error) {
	switch {
	case name == "":
		return nil, nil
	case name == "pyasn6":
		return Load6(PyASN6)
	}
	grower, v := Synthesize6, ""
	if w, ok := strings.CutSuffix(name, "v6u"); ok {
		grower, v = Spread6, w
	} else if w, ok := strings.CutSuffix(name, "v6"); ok {
		v = w
	}
	if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 4_000_000 {
			return nil, fmt.Errorf("--fib %q: 1v6 to 4000000v6 prefixes (or v6u)", name)
		}
		base, err := Load6(PyASN6)
		if err != nil {
			return nil, err
		}
		return cutOrGrow(base, n, grower), nil
	}
	if _, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("--fib %q: pyasn6, Nv6 or Nv6u (a number of prefixes), or a pyasn-format file", name)
	}
	return Load6(name)
}
