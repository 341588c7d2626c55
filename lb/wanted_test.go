package lb

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/element"
)

// The table the LB wants: the VCP's entries less the back-ends whose
// hellos stopped; but when every one's stopped at once (the LB's own
// stall, or the interconnect's), all of them but the draining, not an
// empty table that drops every frame (finding 16).
func TestWantedKeepsAllWhenAllSilent(t *testing.T) {
	a := &Agent{cfg: &AgentConfig{Config: element.Config{HelloInterval: 100 * time.Millisecond, HoldMultiplier: 3}}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ports: []*agentPort{{name: "i0", index: 1, ifindex: 7, role: RoleInternal}}, backends: map[string]*backendState{}}
	now := time.Now()
	var entries []dist.TableEntry
	for i := range 4 {
		mac := net.HardwareAddr{2, 0, 0, 0, 0xb0, byte(i + 1)}
		entries = append(entries, dist.TableEntry{MAC: mac, Port: 1, Weight: 1})
		a.backends[mac.String()] = &backendState{mac: mac, last: now}
	}
	a.vcpTable = &vcpTable{mode: ModeHash, entries: entries}
	macs := func(bs []Backend) (out []string) {
		for _, b := range bs {
			out = append(out, b.MAC.String())
		}
		return out
	}
	if _, bs := a.wanted(now); len(bs) != 4 {
		t.Fatalf("all heard: %v", macs(bs))
	}
	// One silent past its hold: dropped at once.
	a.backends[entries[1].MAC.String()].last = now.Add(-time.Second)
	if _, bs := a.wanted(now); len(bs) != 3 || a.panicking {
		t.Errorf("one silent: %v (panicking %v), want the other 3", macs(bs), a.panicking)
	}
	// Every one silent, one of them draining: the three others kept.
	for _, e := range entries {
		a.backends[e.MAC.String()].last = now.Add(-time.Second)
	}
	a.backends[entries[3].MAC.String()].draining = true
	if _, bs := a.wanted(now); len(bs) != 3 || !a.panicking || a.allSilent != 1 {
		t.Errorf("every one silent: %v (panicking %v, %d times), want the 3 not draining kept", macs(bs), a.panicking, a.allSilent)
	}
	// Heard again: back to the live ones.
	a.backends[entries[0].MAC.String()].last = now
	if _, bs := a.wanted(now); len(bs) != 1 || a.panicking {
		t.Errorf("one heard again: %v (panicking %v), want it alone", macs(bs), a.panicking)
	}
}
