package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// The control plane and the demo are clients of the elements' APIs: they
// link the API packages (lbapi, routerapi), never an element's data path
// (its BPF loader, FIB, agent). A VCP host need not carry the back-end's
// code, and a change inside an element cannot break the console's build.
func TestControlPlaneLinksNoDataPath(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../vcp", "../demo").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/msr-router/msr/"
	var apis int
	for _, pkg := range strings.Fields(string(out)) {
		switch strings.TrimPrefix(pkg, module) {
		case "lb", "router", "traffic", "bench":
			t.Errorf("the VCP or the demo links %s", pkg)
		case "lb/lbapi", "router/routerapi":
			apis++
		}
	}
	if apis != 2 {
		t.Errorf("the VCP and the demo should reach the elements through lbapi and routerapi; go list -deps:\n%s", out)
	}
}
