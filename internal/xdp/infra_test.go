package xdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// Infra lays each family's prefixes out as infra.h reads them: address
// and mask in network order, counted, and leaves out what has no room.
func TestInfra(t *testing.T) {
	b := Infra([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00:1::/33"), netip.MustParsePrefix("192.168.7.9/16")})
	if len(b) != InfraSize {
		t.Fatalf("%d bytes, want %d", len(b), InfraSize)
	}
	if n4, n6 := binary.NativeEndian.Uint32(b[0:]), binary.NativeEndian.Uint32(b[4:]); n4 != 2 || n6 != 1 {
		t.Errorf("counts %d and %d, want 2 and 1", n4, n6)
	}
	for _, c := range []struct {
		at   int
		want []byte
	}{
		{8, []byte{10, 0, 0, 0, 255, 255, 255, 0}},
		{16, []byte{192, 168, 0, 0, 255, 255, 0, 0}}, // masked
		{8 + InfraPrefixes*8, []byte{0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		if got := b[c.at : c.at+len(c.want)]; !bytes.Equal(got, c.want) {
			t.Errorf("at %d: %x, want %x", c.at, got, c.want)
		}
	}
	var many []netip.Prefix
	for i := range InfraPrefixes + 3 {
		many = append(many, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16))
	}
	if n4 := binary.NativeEndian.Uint32(Infra(many)); n4 != InfraPrefixes {
		t.Errorf("%d prefixes written of %d, room for %d", n4, len(many), InfraPrefixes)
	}
}

// One CPU's counters add into the sums under their enum's names.
func TestAddByName(t *testing.T) {
	sums := map[string]uint64{"runt": 1}
	AddByName(sums, []string{"runt", "bad_ip"}, []uint64{2, 0})
	AddByName(sums, []string{"runt", "bad_ip"}, []uint64{0, 5})
	if sums["runt"] != 3 || sums["bad_ip"] != 5 || len(sums) != 2 {
		t.Errorf("sums %v, want runt 3, bad_ip 5", sums)
	}
}
