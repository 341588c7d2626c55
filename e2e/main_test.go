// Package e2e holds the whole router's proofs: labs of real namespaces,
// every element its own msr process, real routing suites as peers and real
// clients (ping, traceroute, iperf3, curl) across the router. Each test is
// a story: the lab up, something done to it, what an operator or a
// neighbour must see. The CLI's own tests stay in cmd/msr.
package e2e

import (
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
)

// msrBin is the msr binary the labs run, built once for the package.
var msrBin string

func TestMain(m *testing.M) { msrtest.Main(m, "../cmd/msr", &msrBin) }

// msr runs the binary and returns stdout, stderr and the exit status.
func msr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return msrtest.Run(t, msrBin, args...)
}
