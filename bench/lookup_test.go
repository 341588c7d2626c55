package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLookup times the lookup alone with a table of each family: every
// destination drawn from the table finds a route in msr's FIB and in the
// kernel's, each lookup costs something plausible (with the loop: a
// lookup that hits the cache may cost nothing beyond it, overlapping the
// loop's own work), and the namespace is gone after.
func TestLookup(t *testing.T) {
	r, err := Lookup(LookupOptions{Tables: []string{"20000", "20000v6"}, Dsts: []int{1000, 50_000}, Runs: 3, Count: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 8 {
		t.Fatalf("%d rows, want 2 tables x 2 destination counts x 2 FIBs", len(r.Rows))
	}
	for _, row := range r.Rows {
		if row.Found < 0.99 || len(row.NsPerLookup) != 3 || row.Median+row.LoopNs <= 0 || row.Median > 10_000 || row.LoopNs <= 0 {
			t.Errorf("%+v", row)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), lookupNS) {
		t.Errorf("%s left behind", lookupNS)
	}
}
