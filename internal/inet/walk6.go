package inet

import "encoding/binary"

// How far Walk6 goes, as bpf/ipv6.h's enum ip6_limit: at most
// IP6ExtMax extension headers, the transport header no further than
// IP6ExtBytes in. (The LB's and the router's codes tests hold these to the
// data paths' own.)
const (
	IP6ExtMax   = 6
	IP6ExtBytes = 512
)

// Walk6 is where an extension header walk ended: the transport header's
// offset and protocol, whether a Fragment header said fragment, and
// whether the chain went past what the walk reads.
type Walk6 struct {
	Off   int
	Proto uint8
	Frag  bool
	Deep  bool
}

// IsIP6Ext says whether a Next Header value is an extension header (RFC
// 8200 §4, RFC 7045).
func IsIP6Ext(nh uint8) bool {
	switch nh {
	case 0, 43, 44, 51, 60, 135, 139, 140:
		return true
	}
	return false
}

// WalkIPv6 is bpf/ipv6.h's ip6_walk in Go, for the data paths' models: ip
// runs from the IPv6 header to the frame's end, plenEnd is the packet's
// end by its Payload Length. False: the chain runs past the packet.
func WalkIPv6(ip []byte, plenEnd int) (Walk6, bool) {
	var w Walk6
	nh, off := ip[6], 40
	for range IP6ExtMax {
		if !IsIP6Ext(nh) {
			break
		}
		if off > IP6ExtBytes {
			w.Deep = true
			break
		}
		if off+8 > len(ip) || off+8 > plenEnd {
			return w, false
		}
		h := ip[off:]
		var n int
		switch nh {
		case 44:
			w.Frag = w.Frag || binary.BigEndian.Uint16(h[2:])&0xfff9 != 0
			n = 8
		case 51:
			n = (int(h[1]) + 2) * 4
		default:
			n = (int(h[1]) + 1) * 8
		}
		nh, off = h[0], off+n
	}
	if IsIP6Ext(nh) || off > IP6ExtBytes {
		w.Deep = true
	}
	w.Off, w.Proto = off, nh
	return w, true
}
