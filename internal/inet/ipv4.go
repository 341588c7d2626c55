package inet

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 builds an IPv4 packet: a 20-byte header with TTL 64 and a correct
// checksum, then payload.
func IPv4(src, dst netip.Addr, proto uint8, payload []byte) []byte {
	h := make([]byte, 20, 20+len(payload))
	h[0], h[8], h[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	copy(h[12:], src.AsSlice())
	copy(h[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(h[10:], Checksum(h))
	return append(h, payload...)
}
