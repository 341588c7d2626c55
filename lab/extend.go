package lab

import (
	"fmt"
	"slices"
)

// Extend adds to a lab that is up the hosts of s (named as the lab, s.Name)
// and its links, which may end on the lab's switches: an element added to
// a running router, as an operator racks a new machine. s names the
// switches it links to, with their new ports; they are not built again.
// Down removes what Extend made with the rest of the lab.
func Extend(s *Spec) (*State, error) {
	unlock, err := lockState(s.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := ReadState(s.Name)
	if err != nil {
		return nil, err
	}
	existing := map[string]bool{}
	for _, n := range st.Nodes {
		existing[n.Name] = true
	}
	for name := range s.Hosts {
		if existing[name] {
			return nil, fmt.Errorf("lab %s already has %s", s.Name, name)
		}
	}
	for name := range s.Switches {
		if !existing[name] {
			return nil, fmt.Errorf("lab %s has no switch %s to link to", s.Name, name)
		}
	}
	b := &builder{spec: s, st: st, existing: existing}
	steps := []func() error{b.namespaces, b.links, b.interfaces, b.carrier, b.sysctls, b.addresses, b.routes, b.processes}
	for _, step := range steps {
		if err := step(); err != nil {
			b.removeNew()
			return nil, err
		}
	}
	return st, st.save()
}

// removeNew deletes the namespaces Extend made (their veths with them).
func (b *builder) removeNew() {
	for _, n := range b.st.Nodes {
		if !b.existing[n.Name] {
			killAll(n.Namespace)
			run("ip", "netns", "del", n.Namespace) //nolint:errcheck
		}
	}
	b.st.Nodes = slices.DeleteFunc(b.st.Nodes, func(n NodeState) bool { return !b.existing[n.Name] })
}
