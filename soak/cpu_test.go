package soak

import (
	"testing"
	"time"
)

// TestParseCPUStat reads each CPU's line of /proc/stat, not the total.
func TestParseCPUStat(t *testing.T) {
	text := "cpu  10 1 20 300 4 0 6 7 0 0\ncpu0 5 1 10 150 2 0 3 4 0 0\ncpu1 5 0 10 150 2 0 3 3 0 0\nintr 1234\n"
	got := parseCPUStat(text)
	if len(got) != 2 || got["cpu0"] != (cpuTimes{5, 1, 10, 150, 2, 0, 3, 4}) || got["cpu1"][6] != 3 {
		t.Errorf("parseCPUStat: %v", got)
	}
}

// TestParseProcStat reads a process's state, its CPU ticks, its start
// and its last CPU, its name holding spaces and a parenthesis.
func TestParseProcStat(t *testing.T) {
	text := "4242 (bird (x) y) R 1 4242 4242 0 -1 4194560 100 0 0 0 70 30 0 0 20 0 1 0 500 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	p, ok := parseProcStat(text)
	if !ok || p.name != "bird (x) y" || p.state != 'R' || p.ticks != 100 || p.start != 500 || p.lastCPU != 1 {
		t.Errorf("parseProcStat: %+v, %v", p, ok)
	}
	if _, ok := parseProcStat("4242 (short) S 1 2"); ok {
		t.Error("a short line parsed")
	}
	// This process's own line parses.
	if p, ok := lookProcs()["1"]; !ok || p.name == "" {
		t.Errorf("pid 1: %+v, %v", p, ok)
	}
	if age := processAge("1"); age < time.Second {
		t.Errorf("pid 1's age %v", age)
	}
}
