package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/msr-router/msr/internal/element"
)

// labReport is what Validate reads of `msr bench scale -o json` (or its
// report.json): the options that shaped the lab, and each point.
type labReport struct {
	Options struct {
		CapLB, CapPort uint64
		// CapBackend is a list; reports before 2026-11-22 hold one number.
		CapBackend json.RawMessage
		Mode       string
		Size       int
		Flows      int
	} `json:"options"`
	Points []ScalePoint `json:"points"`
}

// Check is one lab point beside the model's prediction of it.
type Check struct {
	LBs             int       `json:"lbs"`
	Backends        int       `json:"backends"`
	InternalPorts   int       `json:"internal_ports"`
	Mode            string    `json:"mode"`
	MeasuredPPS     float64   `json:"measured_pps"`
	PredictedPPS    float64   `json:"predicted_pps"`
	Ratio           float64   `json:"ratio"` // predicted / measured
	Within10        bool      `json:"within_10pct"`
	MeasuredShares  []float64 `json:"measured_shares,omitempty"`
	PredictedShares []float64 `json:"predicted_shares,omitempty"`
	// SharesOff is the largest difference between a back-end's measured
	// and predicted share.
	SharesOff float64 `json:"shares_off"`
	// Modelled is false for the lab's "machine" points: what limits them
	// is the lab's one shared machine, which the model leaves out.
	Modelled bool   `json:"modelled"`
	LabLimit string `json:"lab_limit"`
}

// Validate predicts every point of a `msr bench scale` report with the
// lab's caps and traffic (the generator's equal flows dealt in turn to
// the LBs, 16 even hosts per LB when it has several internal ports, the
// caps' 256-frame bucket) and sets each beside what the lab measured.
func Validate(path string, o Options) ([]Check, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep labReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: not a `msr bench scale` report: %w", path, err)
	}
	var caps []uint64
	if err := json.Unmarshal(rep.Options.CapBackend, &caps); err != nil {
		var one uint64
		if err := json.Unmarshal(rep.Options.CapBackend, &one); err != nil && len(rep.Options.CapBackend) > 0 {
			return nil, fmt.Errorf("%s: options.CapBackend: %w", path, err)
		}
		if one > 0 {
			caps = []uint64{one}
		}
	}
	if rep.Options.Mode == "" {
		rep.Options.Mode = "wrr"
	}
	o.CapLB, o.CapPort, o.CapBackend = rep.Options.CapLB, rep.Options.CapPort, caps
	o.Size, o.Flows = rep.Options.Size, rep.Options.Flows
	o.FlowSizes, o.Burst, o.LBSpread, o.EvenHosts, o.Hosts = "equal", 1, "even", true, 16
	o.Queue = element.CapBurst
	var out []Check
	for _, lp := range rep.Points {
		p, err := Predict(o, lp.LBs, lp.Backends, lp.InternalPorts, rep.Options.Mode)
		if err != nil {
			return nil, fmt.Errorf("%s: point %d/%d/%d: %w", path, lp.LBs, lp.Backends, lp.InternalPorts, err)
		}
		c := Check{LBs: lp.LBs, Backends: lp.Backends, InternalPorts: lp.InternalPorts, Mode: rep.Options.Mode,
			MeasuredPPS: lp.MeasuredPPS, PredictedPPS: p.PredictedPPS, MeasuredShares: lp.Shares,
			PredictedShares: p.Shares, LabLimit: lp.Limit, Modelled: lp.Limit != "machine"}
		if lp.MeasuredPPS > 0 {
			c.Ratio = p.PredictedPPS / lp.MeasuredPPS
		}
		c.Within10 = math.Abs(c.Ratio-1) <= 0.10
		for j := range min(len(c.MeasuredShares), len(c.PredictedShares)) {
			c.SharesOff = math.Max(c.SharesOff, math.Abs(c.MeasuredShares[j]-c.PredictedShares[j]))
		}
		out = append(out, c)
	}
	return out, nil
}
