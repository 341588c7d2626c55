package router

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
)

// TestSavedStateEncode: the state file is json.Marshal's, byte for byte
// (a restarted agent of any version reads it as before), and writing a
// full table's allocates next to nothing: json.Marshal built 7 MB of
// base64 in a doubling buffer, and pooled the buffer.
func TestSavedStateEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	routes := make(map[netip.Prefix]uint32, 600_000)
	for len(routes) < 600_000 {
		bits := 8 + rng.IntN(17)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(rng.IntN(224)), byte(rng.Uint32()), byte(rng.Uint32()), 0}), bits).Masked()
		routes[p] = 1 + uint32(rng.IntN(3))
	}
	full := &savedState{Routes: packRoutes(newRouteSet(routes), 4), Routes6: packRoutes(newRouteSet(map[netip.Prefix]uint32{netip.MustParsePrefix("2001:db8::/32"): 2}), 16),
		NextHops: []savedNextHop{{ID: 1, GW: netip.MustParseAddr("10.0.0.1"), Port: 3}, {ID: 2, GW: netip.MustParseAddr("fe80::1%7"), Port: 4}},
		Groups:   map[uint32][]uint32{1: {1}, 2: {1, 2}, 3: {2}}, Operator: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	for name, s := range map[string]*savedState{"full table": full, "empty": {Groups: map[uint32][]uint32{}}, "no IPv6": {Routes: full.Routes[:9*3], Routes6: []byte{}}} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := s.encode(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			n := min(len(want), got.Len(), 200)
			t.Errorf("%s: encode wrote %d bytes, json.Marshal %d; first %d: %s\nwant %s", name, got.Len(), len(want), n, got.Bytes()[:n], want[:n])
		}
	}
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	marshal := allocated(func() { json.Marshal(full) })
	encode := allocated(func() { full.encode(io.Discard) })
	t.Logf("a full table's state: json.Marshal allocated %d kB, encode %d kB", marshal>>10, encode>>10)
	if encode > 1<<20 {
		t.Errorf("encode allocated %d kB writing a full table's state (json.Marshal %d kB)", encode>>10, marshal>>10)
	}
}
