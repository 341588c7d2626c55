package dist

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// A set message (STATIC_NEIGHBORS, PEERS) carries a whole set in one
// frame: the target element's id, the count, then that many entries of
// setEntryLen bytes, each an address (an IPv4 one as its IPv4-mapped
// address) and the VLAN of its external port, then the set's own bytes.
const (
	setHdrLen   = 16
	setEntryLen = 24
	// maxSetEntries is how many entries one frame holds.
	maxSetEntries = (MaxBodyLen - setHdrLen) / setEntryLen
)

// appendSet appends a set of n entries for target, each written by
// entry: the 6 bytes after its address and VLAN, or what is wrong with it.
func appendSet(b []byte, what string, target uint64, n int, entry func(i int) (netip.Addr, uint16, [6]byte, error)) ([]byte, error) {
	if n > maxSetEntries {
		return nil, fmt.Errorf("%d %s, at most %d", n, what, maxSetEntries)
	}
	b = binary.BigEndian.AppendUint64(b, target)
	b = append(b, uint8(n), 0, 0, 0, 0, 0, 0, 0)
	for i := range n {
		a, vlan, rest, err := entry(i)
		if err != nil {
			return nil, err
		}
		a16 := a.As16()
		b = append(b, a16[:]...)
		b = binary.BigEndian.AppendUint16(b, vlan)
		b = append(b, rest[:]...)
	}
	return b, nil
}

// decodeSet checks a set's header and length, then gives each entry's
// address, VLAN and own 6 bytes to entry; it returns the target.
func decodeSet(b []byte, what string, entry func(i int, a netip.Addr, vlan uint16, rest [6]byte) error) (uint64, error) {
	if len(b) < setHdrLen {
		return 0, errShort
	}
	n := int(b[8])
	switch {
	case n > maxSetEntries || len(b) != setHdrLen+n*setEntryLen:
		return 0, fmt.Errorf("%d %s in %d bytes", n, what, len(b))
	case [7]byte(b[9:16]) != [7]byte{}:
		return 0, errReserved
	}
	for i := range n {
		e := b[setHdrLen+i*setEntryLen:][:setEntryLen]
		if err := entry(i, netip.AddrFrom16([16]byte(e[0:16])).Unmap(), binary.BigEndian.Uint16(e[16:18]), [6]byte(e[18:24])); err != nil {
			return 0, err
		}
	}
	return binary.BigEndian.Uint64(b[0:8]), nil
}
