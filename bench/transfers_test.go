package bench

import (
	"io"
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
)

// Seed 002's transfers, short: 4 MB twice over HTTP and FTP across a
// Linux router and across msr (the default lab): every file arrives
// intact, the summary has a row per router and protocol, and the report
// draws its plot.
func TestTransfers(t *testing.T) {
	bin, remove, err := msrtest.Build("../cmd/msr")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	r, err := Transfers(TransferOptions{DUTs: TransferDUTs, Protocols: TransferProtocols, SizeMB: 4, Count: 2, MSR: bin}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Transfers) != 8 || len(r.Summary) != 4 {
		t.Fatalf("transfers %+v, summary %+v", r.Transfers, r.Summary)
	}
	for _, s := range r.Summary {
		if s.Intact != 2 || s.MedianSeconds <= 0 || s.MinSeconds > s.MaxSeconds || s.MedianMbps <= 0 {
			t.Errorf("summary %+v", s)
		}
	}
	dir := t.TempDir()
	if err := r.WriteReport(dir, "msr bench transfers (test)"); err != nil {
		t.Fatal(err)
	}
	checkPlots(t, dir, r.Figures, []string{"transfers.png"})
}
