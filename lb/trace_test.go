package lb

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/internal/trace"
)

// TestLBTrace: with no trace on nothing is reported; with one on, a
// frame that matches coming in by an external port is reported once it
// is balanced (its module, slot, table mode, ports), up to the trace's
// count, a frame of another port or address not at all, and a dropped
// one with its reason; held, the LB reports only what comes from
// inside (a routed frame out of its VLAN's port), up to its budget.
func TestLBTrace(t *testing.T) {
	withFixture(t, ModeHash, func(f *fixture) {
		rd, err := perf.NewReader(f.dp.objs.LbTraceEvents, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		read := func() []trace.Raw {
			var out []trace.Raw
			rd.SetDeadline(time.Now().Add(50 * time.Millisecond))
			for {
				rec, err := rd.Read()
				if errors.Is(err, perf.ErrFlushed) {
					continue
				}
				if err != nil {
					return out
				}
				r, err := trace.ParseRaw(rec.RawSample)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, r)
			}
		}
		e0, i0 := f.ports["e0"], f.ports["i0"]
		match := eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 4000, 53))
		other := eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 4000, 54))
		notOurs := eth(macHost, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 4000, 53))
		run := func(ifindex int, frames ...[]byte) {
			for _, fr := range frames {
				if _, _, err := f.dp.Run(ifindex, fr); err != nil {
					t.Fatal(err)
				}
			}
		}

		run(e0.Ifindex, match, match)
		if got := read(); len(got) != 0 {
			t.Errorf("no trace on: %d reports", len(got))
		}
		spec := trace.Spec{ID: 7, Src: ipHostA, Dst: ipHostB, Proto: 17, DPort: 53, Count: 3}
		if err := f.dp.SetTrace(&spec); err != nil {
			t.Fatal(err)
		}
		run(e0.Ifindex, match, other, notOurs, match, match, match)
		got := read()
		if len(got) != 3 {
			t.Fatalf("count 3: %d reports: %+v", len(got), got)
		}
		for i, r := range got {
			want := [2]string{"sent", "balance"}
			if i == 1 {
				want = [2]string{"dropped", "not_ours"}
			}
			reason := ""
			if r.Verdict == 1 {
				reason = ModuleNames[r.Reason]
			} else if int(r.Reason) < len(DropNames) {
				reason = DropNames[r.Reason]
			}
			if r.ID != 7 || r.VerdictName() != want[0] || reason != want[1] || r.InPort != uint32(e0.Index) || len(r.Frame) != len(match) {
				t.Errorf("report %d: %+v (%s), want %v in by e0", i, r, reason, want)
			}
			if r.Verdict == 1 && (r.Detail[1] != uint32(ModeHash) || r.OutPort == uint32(e0.Index) || r.Detail[2] != 4) {
				t.Errorf("balanced: %+v, want the hash table's slot, out by an internal port", r)
			}
		}

		spec.Hold = true
		if err := f.dp.SetTrace(&spec); err != nil {
			t.Fatal(err)
		}
		back := tagged(macHost, macR[2], 10, etherTypeIPv4, udp(ipHostA, ipHostB, 4000, 53))
		run(e0.Ifindex, match)
		run(i0.Ifindex, back, back)
		if got := read(); len(got) != 2 || got[0].InPort != uint32(i0.Index) || got[0].OutPort != uint32(e0.Index) || ModuleNames[got[0].Reason] != "int_to_ext" {
			t.Errorf("held: %+v, want the 2 frames from inside only, out by e0", got)
		}
		for range spec.Budget() {
			run(i0.Ifindex, back)
		}
		if got := read(); len(got) != int(spec.Budget())-2 {
			t.Errorf("past its budget of %d: %d more reports, want %d", spec.Budget(), len(got), spec.Budget()-2)
		}
		if err := f.dp.SetTrace(nil); err != nil {
			t.Fatal(err)
		}
		run(e0.Ifindex, match)
		run(i0.Ifindex, back)
		if got := read(); len(got) != 0 {
			t.Errorf("trace ended: %d reports", len(got))
		}
	})
}
