package vcp

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/msr-router/msr/internal/config"
)

// An ExternalPortRange writes many external ports in one stanza, as a
// router's interface range does: every LB of a numbered range (lbs:
// "lb[1-16]"), the ports numbered within each (ports: "[0-3]"), each
// port's MAC, addresses and description from templates in which {lb}
// and {port} are the numbers ({lb:02x}: in a verb of Go's fmt), and the
// VLANs from vlan on, one each, LB by LB and port by port. The rest is
// as every external port's. The ports it makes are checked as written
// ones are, at the range's line.
type ExternalPortRange struct {
	LBs                  string     `yaml:"lbs" msr:"required"`
	Ports                string     `yaml:"ports" msr:"required"`
	MAC                  string     `yaml:"mac" msr:"required"`
	Address              string     `yaml:"address" msr:"required"`
	Address6             string     `yaml:"address6"`
	VLAN                 uint16     `yaml:"vlan" msr:"required"` // the first port's
	MTU                  uint16     `yaml:"mtu"`
	RouterAdvertisements bool       `yaml:"router_advertisements"`
	Description          string     `yaml:"description"`
	URPF                 string     `yaml:"urpf"`
	Pos                  config.Pos `yaml:"-"`
}

// numberRange is "[FIRST-LAST]" with what comes before and after it:
// lb[1-16], [0-3], rack[01-08]-lb.
var numberRange = regexp.MustCompile(`^([^\[\]]*)\[(\d+)-(\d+)\]([^\[\]]*)$`)

// placeholder is {lb} or {port}, with an optional fmt verb: {lb:02x}.
var placeholder = regexp.MustCompile(`\{([a-z]+)(?::([0-9]*[dxXo]))?\}`)

// maxRange bounds a range's numbers: no router has more LBs or ports.
const maxRange = 4094

// expandPortRanges appends the external ports every range makes.
func (c *FileConfig) expandPortRanges() error {
	for _, r := range c.ExternalPortRanges {
		ports, err := r.expand()
		if err != nil {
			return r.Pos.Errorf("external port range %s %s: %v", r.LBs, r.Ports, err)
		}
		c.ExternalPorts = append(c.ExternalPorts, ports...)
	}
	return nil
}

// expand is the range's ports.
func (r ExternalPortRange) expand() ([]ExternalPortConfig, error) {
	lbPrefix, lbs, lbSuffix, err := parseRange(r.LBs)
	if err != nil {
		return nil, fmt.Errorf("lbs: %v", err)
	}
	portPrefix, ports, portSuffix, err := parseRange(r.Ports)
	if err != nil {
		return nil, fmt.Errorf("ports: %v", err)
	}
	if portPrefix != "" || portSuffix != "" {
		return nil, fmt.Errorf("ports %q: a range of numbers alone, [FIRST-LAST]", r.Ports)
	}
	if last := int(r.VLAN) + len(lbs)*len(ports) - 1; r.VLAN == 0 || last > 4094 {
		return nil, fmt.Errorf("VLANs %d to %d: VLAN ids are 1-4094", r.VLAN, last)
	}
	var out []ExternalPortConfig
	vlan := r.VLAN
	for _, lb := range lbs {
		for _, port := range ports {
			n := map[string]int{"lb": lb.n, "port": port.n}
			p := ExternalPortConfig{LB: lbPrefix + lb.text + lbSuffix, VLAN: vlan, MTU: r.MTU, RouterAdvertisements: r.RouterAdvertisements, URPF: r.URPF, Pos: r.Pos}
			vlan++
			var address, address6 string
			for _, f := range []struct {
				name, template string
				into           *string
			}{{"mac", r.MAC, &p.MAC}, {"address", r.Address, &address}, {"address6", r.Address6, &address6}, {"description", r.Description, &p.Description}} {
				if *f.into, err = fill(f.template, n); err != nil {
					return nil, fmt.Errorf("%s %q: %v", f.name, f.template, err)
				}
			}
			if p.Address, err = netip.ParsePrefix(address); err != nil {
				return nil, fmt.Errorf("%s port %d: address %q: %v", p.LB, port.n, address, err)
			}
			if address6 != "" {
				if p.Address6, err = netip.ParsePrefix(address6); err != nil {
					return nil, fmt.Errorf("%s port %d: address6 %q: %v", p.LB, port.n, address6, err)
				}
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// A rangeNumber is one number of a range, and its text as the name
// writes it (with the first's leading zeros).
type rangeNumber struct {
	n    int
	text string
}

// parseRange reads PREFIX[FIRST-LAST]SUFFIX.
func parseRange(s string) (prefix string, numbers []rangeNumber, suffix string, err error) {
	m := numberRange.FindStringSubmatch(s)
	if m == nil {
		return "", nil, "", fmt.Errorf("%q is not NAME[FIRST-LAST]", s)
	}
	first, err1 := strconv.Atoi(m[2])
	last, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil || first > last || last > maxRange {
		return "", nil, "", fmt.Errorf("%q: FIRST no more than LAST, at most %d", s, maxRange)
	}
	width := 0
	if len(m[2]) > 1 && m[2][0] == '0' {
		width = len(m[2])
	}
	for i := first; i <= last; i++ {
		numbers = append(numbers, rangeNumber{i, fmt.Sprintf("%0*d", width, i)})
	}
	return m[1], numbers, m[4], nil
}

// fill puts the numbers into a template's placeholders.
func fill(template string, n map[string]int) (string, error) {
	var err error
	out := placeholder.ReplaceAllStringFunc(template, func(ph string) string {
		m := placeholder.FindStringSubmatch(ph)
		v, ok := n[m[1]]
		if !ok {
			err = fmt.Errorf("{%s}: the placeholders are {lb} and {port}", m[1])
			return ph
		}
		verb := m[2]
		if verb == "" {
			verb = "d"
		}
		return fmt.Sprintf("%"+verb, v)
	})
	if err == nil && strings.ContainsAny(out, "{}") {
		err = fmt.Errorf("a brace that is no placeholder ({lb}, {port}, {lb:02x})")
	}
	return out, err
}
