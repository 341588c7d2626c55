package demo

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/labs"
)

// DefaultLabFile is the default lab's file, as reports name it.
const DefaultLabFile = "labs/default.yaml"

// LabSpec returns the lab UpWith builds, its placeholders filled (MSR_BIN:
// msr, MSR_RUN: RunDir) and checked: the default lab, or o.LabFile in its
// place. A bad line of the file is refused with its position (lab.Load);
// a file that is not a variant of the default lab (checkVariant) with
// what it lacks.
func LabSpec(msr string, o Options) (*lab.Spec, error) {
	raw, err := labs.Raw(LabName)
	if err != nil {
		return nil, err
	}
	fill := strings.NewReplacer("MSR_BIN", msr, "MSR_RUN", RunDir)
	def, err := lab.Load(DefaultLabFile, []byte(fill.Replace(string(raw))))
	if err != nil || o.LabFile == "" {
		return def, err
	}
	data, err := os.ReadFile(o.LabFile)
	if err != nil {
		return nil, fmt.Errorf("lab file: %w", err)
	}
	spec, err := lab.Load(o.LabFile, []byte(fill.Replace(string(data))))
	if err != nil {
		return nil, err
	}
	if err := checkVariant(o.LabFile, spec, def); err != nil {
		return nil, err
	}
	return spec, nil
}

// checkVariant refuses a lab file in the default lab's place (msr soak
// --lab, msr demo up --lab) that lacks what the configs WriteConfigs
// writes, the soak's traffic and faults, and add-backend rely on: the
// lab's name; every host of the default lab, each with its interfaces,
// their addresses and MACs, and its processes by name; every switch port
// and every link. Everything else may differ: interface settings (MTU,
// offloads, GRO, threaded NAPI, qdisc), a switch's XDP, sysctls, routes,
// neighbours, the processes' commands (a wrapper, a flag), and hosts,
// ports, links and processes of its own.
func checkVariant(file string, got, want *lab.Spec) error {
	if got.Name != want.Name {
		return got.Pos.Errorf("lab name %q: a lab in the default lab's place is named %s (its namespaces, run directory and pinned maps are)", got.Name, want.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(want.Hosts)) {
		w, g := want.Hosts[name], got.Hosts[name]
		if g == nil {
			return fmt.Errorf("%s: no host %s: a lab in the default lab's place has every host of %s (%s:%d)", file, name, DefaultLabFile, DefaultLabFile, w.Pos.Line)
		}
		for _, ifname := range slices.Sorted(maps.Keys(w.Interfaces)) {
			wi, gi := w.Interfaces[ifname], g.Interfaces[ifname]
			if gi == nil {
				return g.Pos.Errorf("host %s has no interface %s: the default lab's configs use it (%s:%d)", name, ifname, DefaultLabFile, wi.Pos.Line)
			}
			if gi.MAC != wi.MAC {
				return gi.Pos.Errorf("%s:%s: MAC %q, the default lab's configs use %q", name, ifname, gi.MAC, wi.MAC)
			}
			for _, p := range wi.Addresses {
				if !slices.Contains(gi.Addresses, p) {
					return gi.Pos.Errorf("%s:%s lacks address %s: the default lab's configs use it", name, ifname, p)
				}
			}
		}
		for _, wp := range w.Processes {
			if !slices.ContainsFunc(g.Processes, func(gp lab.ProcessSpec) bool { return gp.Name == wp.Name }) {
				return g.Pos.Errorf("host %s has no process %s: the soak and msr ctl drive it (%s:%d)", name, wp.Name, DefaultLabFile, wp.Pos.Line)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want.Switches)) {
		w, g := want.Switches[name], got.Switches[name]
		if g == nil {
			return fmt.Errorf("%s: no switch %s: a lab in the default lab's place has every switch of %s (%s:%d)", file, name, DefaultLabFile, DefaultLabFile, w.Pos.Line)
		}
		for _, port := range slices.Sorted(maps.Keys(w.Interfaces)) {
			if g.Interfaces[port] == nil {
				return g.Pos.Errorf("switch %s has no port %s (%s:%d)", name, port, DefaultLabFile, w.Interfaces[port].Pos.Line)
			}
		}
	}
	linked := map[[2]string]bool{}
	for _, l := range got.Links {
		linked[linkKey(l)] = true
	}
	for _, l := range want.Links {
		if !linked[linkKey(l)] {
			return fmt.Errorf("%s: no link %s -- %s: a lab in the default lab's place has every link of %s (%s:%d)", file, l.Ends[0], l.Ends[1], DefaultLabFile, DefaultLabFile, l.Pos.Line)
		}
	}
	return nil
}

// linkKey is a link's ends, in order: a link is the same either way round.
func linkKey(l lab.LinkSpec) [2]string {
	k := [2]string{l.Ends[0], l.Ends[1]}
	if k[1] < k[0] {
		k[0], k[1] = k[1], k[0]
	}
	return k
}
