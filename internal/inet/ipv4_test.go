package inet

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestIPv4(t *testing.T) {
	p := IPv4(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1, []byte{8, 0, 0, 0})
	want := []byte{0x45, 0, 0, 24, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 8, 0, 0, 0}
	if !bytes.Equal(p[:10], want[:10]) || !bytes.Equal(p[12:], want[12:]) || Checksum(p[:20]) != 0 {
		t.Errorf("IPv4 = % x, want % x with a checksum that verifies", p, want)
	}
}
