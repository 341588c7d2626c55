package xdp

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// MmapWords maps the first n u32 entries of an mmapable array into this
// process: the words, and the mapping for Munmap.
func MmapWords(m *ebpf.Map, n int) ([]uint32, []byte, error) {
	b, err := unix.Mmap(m.FD(), 0, n*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", m, err)
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n), b, nil
}
