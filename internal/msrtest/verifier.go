package msrtest

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
)

// verifierLimit is the kernel's BPF_COMPLEXITY_LIMIT_INSNS: a program
// whose check takes more instructions than this does not load.
const verifierLimit = 1_000_000

var processed = regexp.MustCompile(`processed (\d+) insns`)

// CheckVerifierHeadroom loads spec's programs (its maps pinned in a
// directory of their own, removed after) and holds each to a quarter of
// the verifier's limit, the instructions its check processed: a program
// near the limit is a change or a kernel away from not loading, and the
// time the check takes is each element's start. Needs root.
func CheckVerifierHeadroom(t *testing.T, spec *ebpf.CollectionSpec) {
	t.Helper()
	dir, err := os.MkdirTemp("/sys/fs/bpf", "msr-test-verifier-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir},
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	for name, p := range coll.Programs {
		m := processed.FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Errorf("%s: no instruction count in the verifier's log:\n%s", name, p.VerifierLog)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		t.Logf("%s: the verifier processed %d instructions (%.1f%% of its limit)", name, n, 100*float64(n)/verifierLimit)
		if n > verifierLimit/4 {
			t.Errorf("%s: the verifier processed %d instructions, over a quarter of its limit of %d:\n%s", name, n, verifierLimit, p.VerifierLog)
		}
	}
}
