package xdp

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/msr-router/msr/internal/inet"
)

// EnumNames reads the C enum called enum from spec's BTF and returns the
// names of its values by number, their prefix cut and in lower case
// (LB_DROP_BAD_IP: "bad_ip"); a value named PREFIX "MAX" counts them and
// is left out. The Go tables that name a data path's counters are checked
// against it, so that the C enum stays their one source.
func EnumNames(spec *ebpf.CollectionSpec, enum, prefix string) ([]string, error) {
	var e *btf.Enum
	if err := spec.Types.TypeByName(enum, &e); err != nil {
		return nil, fmt.Errorf("enum %s: %w", enum, err)
	}
	var names []string
	for _, v := range e.Values {
		name := strings.TrimPrefix(v.Name, prefix)
		if name == "MAX" {
			continue
		}
		if v.Value != uint64(len(names)) {
			return nil, fmt.Errorf("enum %s: %s is %d, want %d (counters are numbered from 0, in order)", enum, v.Name, v.Value, len(names))
		}
		names = append(names, strings.ToLower(name))
	}
	return names, nil
}

// AddByName adds one CPU's counters, numbered as the C enum names names,
// into sums by name.
func AddByName(sums map[string]uint64, names []string, counts []uint64) {
	for i, v := range counts {
		sums[names[i]] += v
	}
}

// CheckEnumNames says, as an error, where names (a Go table of a C enum's
// values' names) and the enum in spec's BTF differ: the check each data
// path's test makes of its counters' names.
func CheckEnumNames(spec *ebpf.CollectionSpec, enum, prefix string, names []string) error {
	want, err := EnumNames(spec, enum, prefix)
	if err != nil {
		return err
	}
	if !slices.Equal(names, want) {
		return fmt.Errorf("enum %s names %q, Go %q", enum, want, names)
	}
	return nil
}

// Codes are what a data path's Go side takes from its C headers and checks
// in its test: its counters' enums by Go's names, and the limits of the
// headers every data path shares, as its bpf2go output generated them.
type Codes struct {
	Enums []Enum
	// IP6ExtMax and IP6ExtBytes are ipv6.h's walk; InfraPrefixes and
	// InfraSize infra.h's table of the router's own prefixes.
	IP6ExtMax, IP6ExtBytes   int
	InfraPrefixes, InfraSize int
}

// Enum is a C enum of counters, its values' prefix, and Go's names.
type Enum struct {
	Name, Prefix string
	Names        []string
}

// CheckCodes says, as one error, where a data path's codes and Go's
// differ: each enum (CheckEnumNames), the IPv6 walk against
// inet.WalkIPv6's, the infra table against Infra's.
func CheckCodes(spec *ebpf.CollectionSpec, c Codes) error {
	var errs []error
	for _, e := range c.Enums {
		errs = append(errs, CheckEnumNames(spec, e.Name, e.Prefix, e.Names))
	}
	if c.IP6ExtMax != inet.IP6ExtMax || c.IP6ExtBytes != inet.IP6ExtBytes {
		errs = append(errs, fmt.Errorf("ipv6.h walks %d headers and %d bytes, inet.WalkIPv6 %d and %d", c.IP6ExtMax, c.IP6ExtBytes, inet.IP6ExtMax, inet.IP6ExtBytes))
	}
	if c.InfraPrefixes != InfraPrefixes || c.InfraSize != InfraSize {
		errs = append(errs, fmt.Errorf("infra.h holds %d prefixes a family in %d bytes, xdp.Infra %d in %d", c.InfraPrefixes, c.InfraSize, InfraPrefixes, InfraSize))
	}
	return errors.Join(errs...)
}
