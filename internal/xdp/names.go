package xdp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
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
