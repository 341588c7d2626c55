package lb

import (
	"flag"
	"fmt"
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/internal/xdp"
)

var updateLayout = flag.Bool("update-layout", false, "record the maps' layout as LayoutVersion's in testdata/layout.txt")

// TestLayoutVersion: the pinned maps' layout is the one recorded for
// LayoutVersion (msrtest.CheckLayout).
func TestLayoutVersion(t *testing.T) {
	spec, err := loadLbxdp()
	if err != nil {
		t.Fatal(err)
	}
	msrtest.CheckLayout(t, fmt.Sprintf("version %d\n%s", LayoutVersion, xdp.Layout(spec)), *updateLayout)
}

// TestVerifierHeadroom: the verifier checks the data path well within its
// limit (msrtest.CheckVerifierHeadroom).
func TestVerifierHeadroom(t *testing.T) {
	spec, err := loadLbxdp()
	if err != nil {
		t.Fatal(err)
	}
	msrtest.CheckVerifierHeadroom(t, spec)
}
