// Package xdp holds what the agents of msr's XDP data paths share: loading
// a collection with its maps pinned (and reused), adopting a pinned XDP
// link across a restart, and sweeping stale map entries.
package xdp

import "github.com/cilium/ebpf"

// DeleteStale deletes the entries of a hash map that keep refuses (what a
// previous run of an agent left in a pinned map).
func DeleteStale[K comparable, V any](m *ebpf.Map, keep func(K, V) bool) {
	var k K
	var v V
	var stale []K
	for it := m.Iterate(); it.Next(&k, &v); {
		if !keep(k, v) {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		m.Delete(k)
	}
}
