package element

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/xdp"
)

// The router's infrastructure: the prefixes of its inside (the
// interconnect, the management network, every element's host address),
// which nothing from an external port may reach or claim as its source
// (bpf/infra.h; docs/operations.md, "Hardening"). An LB and a back-end
// each take their host's own prefixes (HostInfra) and the file's
// `infrastructure`.

// InfraPrefixes bounds each family's prefixes (infra.h's).
const InfraPrefixes = xdp.InfraPrefixes

// InfraPrefix is one prefix of `infrastructure`: masked, and not so short
// that it takes the outside in too.
type InfraPrefix netip.Prefix

// UnmarshalText parses and checks a prefix; the file's decoder gives its
// error the line.
func (p *InfraPrefix) UnmarshalText(b []byte) error {
	pf, err := netip.ParsePrefix(string(b))
	if err != nil {
		return err
	}
	if pf.Masked() != pf {
		return fmt.Errorf("%s has host bits set (%s?)", pf, pf.Masked())
	}
	if pf.Addr().Is4In6() || !pf.Addr().IsGlobalUnicast() {
		return fmt.Errorf("%s is not a unicast prefix", pf)
	}
	if min := map[bool]int{true: 8, false: 16}[pf.Addr().Is4()]; pf.Bits() < min {
		return fmt.Errorf("%s is shorter than /%d: it would take in hosts outside the router", pf, min)
	}
	*p = InfraPrefix(pf)
	return nil
}

// Inside is the router's inside as an element holds it: the file's
// prefixes and its host's, masked, without duplicates, each family at
// most InfraPrefixes (the file's first).
func Inside(file []InfraPrefix, host []netip.Prefix, pos config.Pos) ([]netip.Prefix, error) {
	var out []netip.Prefix
	n := map[bool]int{}
	add := func(p netip.Prefix, fromFile bool) error {
		p = p.Masked()
		if slices.Contains(out, p) {
			return nil
		}
		if n[p.Addr().Is4()] == InfraPrefixes {
			if fromFile {
				return pos.Errorf("infrastructure: more than %d prefixes of one family", InfraPrefixes)
			}
			return fmt.Errorf("this host's prefixes and the file's infrastructure: more than %d of one family", InfraPrefixes)
		}
		n[p.Addr().Is4()]++
		out = append(out, p)
		return nil
	}
	for _, p := range file {
		if err := add(netip.Prefix(p), true); err != nil {
			return nil, err
		}
	}
	for _, p := range host {
		if err := add(p, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HostInfra is the prefixes of this host's unicast addresses (not
// loopback, not link-local) on its interfaces but those skip names: an
// element's management NIC and interconnect, not the router's ports.
func HostInfra(skip func(ifname string) bool) ([]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, ifi := range ifs {
		if skip(ifi.Name) {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() || !p.Addr().IsGlobalUnicast() {
				continue
			}
			if p = p.Masked(); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
