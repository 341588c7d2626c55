package e2e

import (
	"os"
	"os/exec"
	"sort"
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

// docs/architecture.md draws the package graph; it must be the code's.
func TestPackageGraphDocumented(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/msr-router/msr/"
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				want = append(want, strings.TrimPrefix(f[0], module)+" --> "+strings.TrimPrefix(imp, module))
			}
		}
	}
	sort.Strings(want)
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "<!-- package graph: begin -->\n```\n")
	block, _, _ = strings.Cut(block, "```\n<!-- package graph: end -->")
	got := strings.Split(strings.TrimSpace(block), "\n")
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/architecture.md's package graph is not the code's; it should read:\n%s", strings.Join(want, "\n"))
	}
}
