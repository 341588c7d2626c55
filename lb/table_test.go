package lb

import (
	"net"
	"testing"
)

func backends(weights ...uint16) []Backend {
	var bs []Backend
	for i, w := range weights {
		bs = append(bs, Backend{MAC: net.HardwareAddr{2, 0, 0, 0, 0xb0, byte(i)}, Ifindex: 5, PortIndex: 1, Weight: w})
	}
	return bs
}

func shares(t *Table) map[byte]int {
	s := map[byte]int{}
	for _, sl := range t.Slots {
		s[sl.MAC[5]]++
	}
	return s
}

func TestWRRSpread(t *testing.T) {
	for _, ws := range [][]uint16{{1, 1, 1}, {2, 2, 1}, {5, 1}, {3, 7, 11, 13}} {
		tb, err := BuildTable(ModeWRR, backends(ws...))
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, w := range ws {
			total += int(w)
		}
		if len(tb.Slots) < MinWRRSlots || len(tb.Slots)%total != 0 {
			t.Errorf("%v: %d slots", ws, len(tb.Slots))
		}
		// Exact shares, in every window of sum(weights) slots.
		for start := 0; start+total <= len(tb.Slots); start += total {
			win := shares(&Table{Slots: tb.Slots[start : start+total]})
			for i, w := range ws {
				if win[byte(i)] != int(w) {
					t.Fatalf("%v: window at %d gives back-end %d %d slots, want %d", ws, start, i, win[byte(i)], w)
				}
			}
		}
		// No runs longer than the heaviest weight forces, give or take the
		// seam where the pattern repeats.
		maxW, run, longest := 0, 1, 1
		for _, w := range ws {
			maxW = max(maxW, int(w))
		}
		for i := 1; i < len(tb.Slots); i++ {
			if tb.Slots[i].MAC[5] == tb.Slots[i-1].MAC[5] {
				run++
			} else {
				run = 1
			}
			longest = max(longest, run)
		}
		bound := (maxW + total - maxW - 1) / max(total-maxW, 1)
		if longest > max(bound, 1)+1 {
			t.Errorf("%v: a run of %d slots of one back-end, at most %d needed", ws, longest, max(bound, 1)+1)
		}
	}
}

func TestMaglevTable(t *testing.T) {
	bs := backends(1, 1, 1, 2)
	tb, err := BuildTable(ModeMaglev, bs)
	if err != nil {
		t.Fatal(err)
	}
	m := len(tb.Slots)
	if m < 100*len(bs) || nextPrime(m) != m {
		t.Errorf("size %d: want a prime of at least %d", m, 100*len(bs))
	}
	s := shares(tb)
	for i, w := range []float64{0.2, 0.2, 0.2, 0.4} {
		got := float64(s[byte(i)]) / float64(m)
		if got < w-0.02 || got > w+0.02 {
			t.Errorf("back-end %d has %.3f of the slots, want %.2f", i, got, w)
		}
	}
	// Removing back-end 1 moves only its slots.
	rest := append(append([]Backend{}, bs[:1]...), bs[2:]...)
	next, err := RebuildTable(tb, bs, ModeMaglev, rest)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tb.Slots {
		if tb.Slots[i].MAC[5] != 1 && next.Slots[i].MAC[5] != tb.Slots[i].MAC[5] {
			t.Fatalf("slot %d moved from %d to %d", i, tb.Slots[i].MAC[5], next.Slots[i].MAC[5])
		}
		if next.Slots[i].MAC[5] == 1 {
			t.Fatalf("slot %d still on the removed back-end", i)
		}
	}
}

func TestBuildTableLimits(t *testing.T) {
	if tb, err := BuildTable(ModeWRR, backends(0, 0)); err != nil || len(tb.Slots) != 0 {
		t.Errorf("all weights 0: %v, %v", tb, err)
	}
	if _, err := BuildTable(ModeWRR, backends(65535, 65535)); err == nil {
		t.Error("weights summing past the table accepted")
	}
	if _, err := BuildTable(ModeMaglev, backends(make([]uint16, 700)...)); err != nil {
		t.Error(err) // weights 0: empty
	}
	many := make([]uint16, 700)
	for i := range many {
		many[i] = 1
	}
	if _, err := BuildTable(ModeMaglev, backends(many...)); err == nil {
		t.Error("700 back-ends fit a 65537-slot Maglev table at 100 slots each")
	}
}
