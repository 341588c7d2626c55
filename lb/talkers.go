package lb

import (
	"time"

	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/lb/lbapi"
)

// The top talkers: sFlow's samples by source, destination and protocol,
// scaled by their port's sampling rate, over the last talkerWindow: what
// the web view shows of who crosses the router. Two halves of the window
// are kept; a new half begins, the older is dropped.

// talkerWindow is how far back the top talkers look; talkerKeys bounds
// the keys a half holds (a scan of many addresses would fill it: the
// samples of keys past it are counted, not kept).
const (
	talkerWindow = time.Minute
	talkerKeys   = 10_000
	talkerTop    = 10
)

type talkerKey struct {
	src, dst string
	proto    uint8
}

type talkerCount struct{ bytes, frames uint64 }

type talkers struct {
	halves  [2]map[talkerKey]*talkerCount // [0] the newer
	start   time.Time                     // when halves[0] began
	dropped uint64                        // samples of keys past talkerKeys
}

// add counts a sampled frame of length bytes, 1 in rate, at now.
func (t *talkers) add(now time.Time, header []byte, length, rate uint32) {
	if p, err := trace.ParsePacket(header); err == nil {
		t.addPacket(now, p, length, rate)
	}
}

// addPacket is add of a frame already parsed.
func (t *talkers) addPacket(now time.Time, p trace.Packet, length, rate uint32) {
	t.turn(now)
	k := talkerKey{p.Src.String(), p.Dst.String(), p.Proto}
	c := t.halves[0][k]
	if c == nil {
		if len(t.halves[0]) >= talkerKeys {
			t.dropped++
			return
		}
		c = &talkerCount{}
		t.halves[0][k] = c
	}
	c.bytes += uint64(length) * uint64(rate)
	c.frames += uint64(rate)
}

// turn begins a new half if the newer one is over.
func (t *talkers) turn(now time.Time) {
	half := talkerWindow / 2
	switch {
	case t.halves[0] == nil || now.Sub(t.start) >= 2*half:
		t.halves = [2]map[talkerKey]*talkerCount{{}, {}}
		t.start = now
	case now.Sub(t.start) >= half:
		t.halves = [2]map[talkerKey]*talkerCount{{}, t.halves[0]}
		t.start = t.start.Add(half)
	}
}

// top is the talkerTop keys of the most bytes, and the seconds they were
// counted over.
func (t *talkers) top(now time.Time) []lbapi.Talker {
	t.turn(now)
	secs := now.Sub(t.start).Seconds()
	if len(t.halves[1]) > 0 {
		secs += (talkerWindow / 2).Seconds()
	}
	sum := map[talkerKey]talkerCount{}
	for _, h := range t.halves {
		for k, c := range h {
			s := sum[k]
			s.bytes, s.frames = s.bytes+c.bytes, s.frames+c.frames
			sum[k] = s
		}
	}
	out := make([]lbapi.Talker, 0, len(sum))
	for k, c := range sum {
		out = append(out, lbapi.Talker{Src: k.src, Dst: k.dst, Proto: trace.ProtoName(k.proto), Bytes: c.bytes, Frames: c.frames, Seconds: secs})
	}
	lbapi.SortTalkers(out)
	return out[:min(len(out), talkerTop)]
}
