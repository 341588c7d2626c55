package router

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BusyMeter estimates how busy a back-end's data path is: the router
// program's CPU time per second of wall time, in cores (0.5: half of one
// core). The back-end reports it in its hellos (the VCP's load-aware
// weights) and in its status.
//
// The kernel counts a program's run time only while BPF run-time
// statistics are on, and then adds two clock reads to every run (measured
// in docs/benchmarks.md's --prog-stats runs: the rates drop). So the meter
// turns them on for Window once every Period and takes the program's run
// time over that window: the data path pays the clock reads a tenth of
// the time by default. Statistics are on host-wide while any holder keeps
// them on; other programs' figures are not disturbed.
type BusyMeter struct {
	prog           *ebpf.Program
	Window, Period time.Duration
	busy           atomic.Uint64 // the last estimate, in ten-thousandths of a core
	measured       atomic.Bool
}

// NewBusyMeter measures prog over 100 ms every second.
func NewBusyMeter(prog *ebpf.Program) *BusyMeter {
	return &BusyMeter{prog: prog, Window: 100 * time.Millisecond, Period: time.Second}
}

// Run samples until ctx ends. It returns at once when the kernel cannot
// turn statistics on (the meter then reports nothing measured).
func (m *BusyMeter) Run(ctx context.Context) {
	t := time.NewTicker(m.Period)
	defer t.Stop()
	for {
		if err := m.sample(ctx); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample measures one window.
func (m *BusyMeter) sample(ctx context.Context) error {
	on, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return err
	}
	defer on.Close()
	before, err := m.prog.Stats()
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(m.Window):
	}
	after, err := m.prog.Stats()
	if err != nil {
		return err
	}
	busy := float64(after.Runtime-before.Runtime) / float64(time.Since(t0))
	m.busy.Store(uint64(busy * 10000))
	m.measured.Store(true)
	return nil
}

// Permyriad is the last estimate in ten-thousandths of one core (as a
// hello carries it, at most 65,535), and whether there is one.
func (m *BusyMeter) Permyriad() (uint16, bool) {
	return uint16(min(m.busy.Load(), 65535)), m.measured.Load()
}
