// Package inet holds the packet arithmetic every part of msr needs.
package inet

import "encoding/binary"

// Checksum is the Internet checksum of RFC 1071: the ones' complement of
// the ones' complement sum of b's 16-bit words. Over a header whose
// checksum field is right, it is 0.
func Checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
