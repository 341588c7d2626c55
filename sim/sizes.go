package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Sizes is a flow-size distribution: how many packets each flow of a
// trial sends, relative to the others.
type Sizes struct {
	kind  int
	alpha float64
}

const (
	sizesEqual = iota
	sizesPareto
	sizesWebSearch
)

// ParseSizes reads equal, pareto:ALPHA (1 < ALPHA ≤ 3) or websearch.
func ParseSizes(s string) (Sizes, error) {
	switch {
	case s == "equal":
		return Sizes{kind: sizesEqual}, nil
	case s == "websearch":
		return Sizes{kind: sizesWebSearch}, nil
	case strings.HasPrefix(s, "pareto:"):
		a, err := strconv.ParseFloat(strings.TrimPrefix(s, "pareto:"), 64)
		if err != nil || a <= 1 || a > 3 {
			return Sizes{}, fmt.Errorf("--flow-sizes %q: pareto:ALPHA with 1 < ALPHA <= 3 (1.2 is heavy-tailed)", s)
		}
		return Sizes{kind: sizesPareto, alpha: a}, nil
	}
	return Sizes{}, fmt.Errorf("--flow-sizes %q: equal, pareto:ALPHA or websearch", s)
}

// webSearch is the flow-size CDF of the web-search cluster measured by
// Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010, Fig. 4 (bytes,
// cumulative fraction of flows), as pFabric (SIGCOMM 2013) and HPCC
// (SIGCOMM 2019) tabulate it for their simulations. Half the flows are
// under 80 kB; flows over 1 MB are 30% of the flows and most of the
// bytes.
var webSearch = []struct{ bytes, cdf float64 }{
	{0, 0}, {10e3, 0.15}, {20e3, 0.20}, {30e3, 0.30}, {50e3, 0.40}, {80e3, 0.53},
	{200e3, 0.60}, {1e6, 0.70}, {2e6, 0.80}, {5e6, 0.90}, {10e6, 0.97}, {30e6, 1},
}

// packets draws one flow's size in packets of frameSize bytes.
func (s Sizes) packets(rng *rand.Rand, frameSize int) float64 {
	switch s.kind {
	case sizesPareto:
		// Pareto with scale 1 packet: P(X > x) = x^-alpha.
		return math.Pow(1-rng.Float64(), -1/s.alpha)
	case sizesWebSearch:
		u := rng.Float64()
		for k := 1; k < len(webSearch); k++ {
			a, b := webSearch[k-1], webSearch[k]
			if u <= b.cdf {
				bytes := a.bytes + (u-a.cdf)/(b.cdf-a.cdf)*(b.bytes-a.bytes)
				payload := float64(max(frameSize-54, 1)) // Ethernet, IPv4 and TCP headers
				return math.Max(1, math.Ceil(bytes/payload))
			}
		}
		return webSearch[len(webSearch)-1].bytes
	}
	return 1
}
