package msrtest

import (
	"os"
	"path/filepath"
	"testing"
)

// CheckLayout holds an element's pinned maps' layout (got: its version
// and internal/xdp.Layout) to the one recorded in testdata/layout.txt. A
// change to a map without a new version would make an upgrade adopt a
// map of another layout as its own, or a downgrade pass unnoticed: bump
// the element's LayoutVersion, then run the test with update set
// (-update-layout) to record it.
func CheckLayout(t *testing.T, got string, update bool) {
	t.Helper()
	path := filepath.Join("testdata", "layout.txt")
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-layout to record it)", err)
	}
	if got != string(want) {
		t.Errorf("the maps' layout is not the one recorded for their version: bump LayoutVersion if a map changed, then run with -update-layout\ngot:\n%s\nrecorded:\n%s", got, want)
	}
}
