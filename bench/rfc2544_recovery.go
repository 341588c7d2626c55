package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/msr-router/msr/traffic"
)

// SeriesStep is the time step of the time series of the recovery and
// overload tests (the rate per 100 ms, as the overload figures plot it).
const SeriesStep = 100 * time.Millisecond

// recovery runs RFC 2544 §26.5 at one size, per DUT with a zero-loss
// rate: a trial's length at Overload × NDR, then, without a pause (the
// generator changes its rate between two frames), a trial's length at
// half NDR; the recovery time is from the change to the last frame lost
// (0: none lost after it). RFC 2544 asks for 60 s of overload at 110% of
// the throughput; the overload lasts --trial here, which overflows every
// queue of these DUTs (veth rings of 256 frames: milliseconds).
func recovery(o RFC2544Options, sessions map[string]*session, size int, ndr []RFC2544Row, progress io.Writer) ([]RFC2544Row, error) {
	var rows []RFC2544Row
	for _, tp := range ndr {
		if tp.NDRPPS == 0 {
			continue
		}
		over, low := o.Overload*tp.NDRPPS, tp.NDRPPS/2
		var changed time.Duration
		t, err := sessions[tp.DUT].send(sendSpec{size: size, rate: over, sample: SeriesStep}, func(g *traffic.Generator) (uint64, error) {
			first := g.Sent()
			n := uint64(over * o.Trial.Seconds())
			if err := g.ChangeRate(low, n); err != nil {
				return 0, err
			}
			err := g.Send(n + uint64(low*o.Trial.Seconds()))
			changed = g.RateChanged()
			return g.Sent() - first, err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tp.DUT, err)
		}
		row := RFC2544Row{DUT: tp.DUT, Size: size, Test: "recovery", RatePPS: over, LowPPS: low, NDRShare: o.Overload,
			LossRatio: t.lossRatio(), SeriesPPS: t.series, SeriesStepMS: ms(SeriesStep)}
		switch {
		case changed == 0:
			return nil, fmt.Errorf("%s: the generator never lowered its rate", tp.DUT)
		case t.rep.LossLast > changed:
			row.RecoveryMS = ms(t.rep.LossLast - changed)
		}
		fmt.Fprintf(progress, "  %-8s %4d B  recovery: %.0f pps then %.0f pps: loss %.4f, last loss %.1f ms after the change\n",
			tp.DUT, size, over, low, row.LossRatio, row.RecoveryMS)
		rows = append(rows, row)
	}
	return rows, nil
}

// overload runs the overload experiment at one size, per DUT with
// a zero-loss rate: OverloadTime at 150% of NDR, the rate the sink counts
// per SeriesStep.
func overload(o RFC2544Options, sessions map[string]*session, size int, ndr []RFC2544Row, progress io.Writer) ([]RFC2544Row, error) {
	var rows []RFC2544Row
	for _, tp := range ndr {
		if tp.NDRPPS == 0 {
			continue
		}
		rate := 1.5 * tp.NDRPPS
		t, err := sessions[tp.DUT].send(sendSpec{size: size, rate: rate, sample: SeriesStep}, func(g *traffic.Generator) (uint64, error) {
			return g.Blast(o.OverloadTime)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tp.DUT, err)
		}
		row := RFC2544Row{DUT: tp.DUT, Size: size, Test: "overload", RatePPS: t.offeredPPS(), NDRShare: 1.5,
			LossRatio: t.lossRatio(), ForwardedPPS: t.receivedPPS(), SeriesPPS: t.series, SeriesStepMS: ms(SeriesStep)}
		fmt.Fprintf(progress, "  %-8s %4d B  overload at %.0f pps for %v: forwarded %.0f pps (NDR %.0f)\n",
			tp.DUT, size, row.RatePPS, o.OverloadTime, row.ForwardedPPS, tp.NDRPPS)
		rows = append(rows, row)
	}
	return rows, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
