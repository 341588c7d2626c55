package sim

import "math"

// Formula is ρmin, the zero-loss capacity the elements' rates give the
// multistage router (docs/scaling.md): min(N1 × min(R_LB, n × R_port),
// Σ R_backend), each rate in packets a second and 0 for no limit; and the
// element kind that sets it (lb, internal_port, backend), or 0 and
// machine when nothing is limited.
func Formula(n1, ports int, lbRate, portRate float64, backends []float64) (float64, string) {
	lbSide, limit := math.Inf(1), ""
	if lbRate > 0 {
		lbSide, limit = lbRate, "lb"
	}
	if portRate > 0 && float64(ports)*portRate < lbSide {
		lbSide, limit = float64(ports)*portRate, "internal_port"
	}
	lbSide *= float64(n1)
	rSide := 0.0
	for _, c := range backends {
		if c == 0 {
			rSide = math.Inf(1)
			break
		}
		rSide += c
	}
	switch {
	case math.IsInf(lbSide, 1) && math.IsInf(rSide, 1):
		return 0, "machine"
	case rSide <= lbSide:
		return rSide, "backend"
	}
	return lbSide, limit
}

// ScalePoint is one (N1, N2, n) of `msr bench scale`: the aggregate
// zero-loss rate measured, and ρmin (Formula) from the caps. The bench
// writes it, Validate reads it.
type ScalePoint struct {
	LBs           int `json:"lbs"`
	Backends      int `json:"backends"`
	InternalPorts int `json:"internal_ports"`
	// MeasuredPPS is the aggregate zero-loss rate (NDR) the sinks
	// received; FormulaPPS is ρmin from the caps, 0 when nothing is
	// capped (the machine is the only limit).
	MeasuredPPS float64 `json:"measured_pps"`
	FormulaPPS  float64 `json:"formula_pps"`
	// Limit is the element kind the formula says limits the point (lb,
	// internal_port, backend); where the measurement falls short of the
	// formula by more than 10%, uneven (only caps dropped: the elements
	// were unevenly loaded) or machine (frames were lost elsewhere), and
	// machine when nothing is capped.
	Limit     string  `json:"limit"`
	Ratio     float64 `json:"ratio"` // measured / formula
	Within10  bool    `json:"within_10pct"`
	Converged bool    `json:"converged"`
	Trials    int     `json:"trials"`
	// Over is a trial a tenth above the zero-loss rate: what each element
	// dropped at its cap there, and what was lost in all; Shares are the
	// back-ends' shares of what they routed in it.
	Over   *ScaleOver `json:"over,omitempty"`
	Shares []float64  `json:"backend_shares"`
	// Weights are the back-ends' shares the LBs' weights ask for.
	Weights []float64 `json:"backend_weights"`
	Reason  string    `json:"reason"`
}

// ScaleOver is the trial above a point's zero-loss rate.
type ScaleOver struct {
	OfferedPPS float64           `json:"offered_pps"`
	Lost       uint64            `json:"lost"`
	CapDrops   map[string]uint64 `json:"cap_drops"` // by element ("lb1", "lb1 internal ports", "r2"), only those that dropped
}
