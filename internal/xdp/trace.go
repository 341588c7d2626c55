package xdp

import (
	"errors"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/internal/trace"
)

// traceBufferBytes is each CPU's room for trace reports: a trace follows
// at most trace.MaxCount packets, each reported in about 140 bytes.
const traceBufferBytes = 64 << 10

// SetTrace sets a data path's trace map (struct msr_trace, trace.h) to
// spec's match, or to none (id 0) if spec is nil.
func SetTrace(m *ebpf.Map, spec *trace.Spec) error {
	var v struct {
		ID, Remaining, Budget uint32
		Family, Proto         uint8
		DPort                 uint16
		Src, Dst              [16]byte
	}
	if spec != nil {
		v.ID, v.Remaining, v.Budget = spec.ID, spec.Count, spec.Budget()
		v.Family, v.Proto, v.DPort = spec.Family(), spec.Proto, spec.DPort
		if spec.Hold {
			v.Remaining = 0
		}
		v.Src, v.Dst = spec.Addrs()
	}
	return m.Put(uint32(0), &v)
}

// ReadTrace reads a data path's trace reports from events until it is
// closed, each put in words by describe (an error: counted malformed)
// and kept by rec. It returns the reader, for its owner to close.
func ReadTrace(events *ebpf.Map, rec *trace.Recorder, describe func(trace.Raw, trace.Packet) trace.Event) (*perf.Reader, error) {
	rd, err := perf.NewReader(events, traceBufferBytes)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			r, err := rd.Read()
			if errors.Is(err, perf.ErrClosed) {
				return
			}
			if err != nil || r.LostSamples > 0 {
				continue
			}
			raw, err := trace.ParseRaw(r.RawSample)
			if err != nil {
				rec.Malformed()
				continue
			}
			pkt, err := trace.ParsePacket(raw.Frame)
			if err != nil {
				rec.Malformed()
				continue
			}
			e := describe(raw, pkt)
			e.At, e.Verdict, e.TTL, e.VLAN, e.Packet, e.Key = rec.At(raw.NS), raw.VerdictName(), pkt.TTL, pkt.VLAN, pkt.String(), pkt.Key
			rec.Add(raw.ID, e)
		}
	}()
	return rd, nil
}
