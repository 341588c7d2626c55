// Package routetable loads and grows IPv4 routing tables for FIBs, labs and
// benchmarks: Debian's python3-pyasn RouteViews snapshots (pyasn's
// "prefix<TAB>asn" format), tables cut from them, and tables grown beyond
// them with their prefix-length mix. The back-end, the VCP (static route
// files) and the benchmarks share it.
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

// Load reads a pyasn .dat(.gz) file ("prefix<TAB>asn" lines, ';'
// comments) and returns its IPv4 prefixes, de-duplicated.
func Load(path string) ([]netip.Prefix, error) {
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
		if p = p.Masked(); p.Addr().Is4() && !seen[p] {
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
		a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		p, _ := a.Prefix(l)
		if !seen[p] && !a.IsLoopback() { // no routing suite takes 127/8
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
		if n <= len(base) {
			// Spread the cut over the whole table, not its first rows.
			out := make([]netip.Prefix, n)
			for i := range out {
				out[i] = base[i*len(base)/n]
			}
			return out, nil
		}
		return Synthesize(base, n, 1), nil
	}
	if _, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("--fib %q: pyasn, a number of prefixes, or a pyasn-format file", name)
	}
	return Load(name)
}
