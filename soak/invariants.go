package soak

import (
	"fmt"
	"strings"
)

// invariants are what must hold over a whole soak: by name, what broke
// each, and what each that held checked (its report's detail).
type invariants struct {
	broken map[string][]string
	detail map[string]string
}

func newInvariants(names ...string) *invariants {
	v := &invariants{broken: map[string][]string{}, detail: map[string]string{}}
	for _, n := range names {
		v.watch(n)
	}
	return v
}

// watch adds an invariant, held until broken.
func (v *invariants) watch(name string) { v.broken[name] = nil }

// broke says what broke an invariant.
func (v *invariants) broke(name, format string, args ...any) {
	v.broken[name] = append(v.broken[name], fmt.Sprintf(format, args...))
}

// held is what an invariant checked, said if it held ("held" if not set).
func (v *invariants) held(name, detail string) { v.detail[name] = detail }

// verdicts are the invariants watched as the report gives them, and
// whether all held.
func (v *invariants) verdicts() (map[string]Invariant, bool) {
	out, ok := map[string]Invariant{}, true
	for name, broken := range v.broken {
		if len(broken) > 0 {
			out[name] = Invariant{Detail: strings.Join(broken, "; ")}
			ok = false
			continue
		}
		out[name] = Invariant{OK: true, Detail: "held"}
		if d, set := v.detail[name]; set {
			out[name] = Invariant{OK: true, Detail: d}
		}
	}
	return out, ok
}
