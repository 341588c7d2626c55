// Package labs ships msr's lab topologies inside the binary, so that
// `msr bench` builds its lab without a source tree.
package labs

import (
	"embed"
	"fmt"
	"strings"

	"github.com/msr-router/msr/lab"
)

//go:embed *.yaml
var files embed.FS

// Load returns the shipped lab NAME (file NAME.yaml), checked: its
// topology, for a bench that reads a lab `msr demo` built. A template's
// placeholders read as what the demo puts there (msr, its run directory);
// msr lab up itself refuses them.
func Load(name string) (*lab.Spec, error) {
	data, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped lab %q", name)
	}
	data = []byte(strings.NewReplacer("MSR_BIN", "msr", "MSR_RUN", "/run/msr/"+name).Replace(string(data)))
	return lab.Load("labs/"+name+".yaml", data)
}

// Raw returns the shipped lab file NAME.yaml as it is, for labs whose
// files carry placeholders (default.yaml: MSR_BIN, MSR_RUN).
func Raw(name string) ([]byte, error) {
	data, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped lab %q", name)
	}
	return data, nil
}
