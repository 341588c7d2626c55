package element

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/config"
)

// Inside puts the file's prefixes first, then the host's, without
// duplicates, and refuses more than a family's room: the file's excess
// at the file's position, the host's without one.
func TestInside(t *testing.T) {
	file := []InfraPrefix{InfraPrefix(netip.MustParsePrefix("10.255.0.0/16")), InfraPrefix(netip.MustParsePrefix("fd00::/64"))}
	host := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("10.255.0.0/16")}
	got, err := Inside(file, host, config.Pos{})
	want := []netip.Prefix{netip.MustParsePrefix("10.255.0.0/16"), netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("10.0.0.0/24")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("%v %v, want %v", got, err, want)
	}
	var many []InfraPrefix
	for i := range InfraPrefixes {
		many = append(many, InfraPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)))
	}
	if _, err := Inside(many, nil, config.Pos{File: "lb.yaml", Line: 1, Column: 1}); err != nil {
		t.Errorf("%d prefixes: %v", len(many), err)
	}
	if _, err := Inside(many, host[:1], config.Pos{}); err == nil || !strings.Contains(err.Error(), "this host's prefixes") {
		t.Errorf("one more of the host's: %v", err)
	}
	if _, err := Inside(append(many, InfraPrefix(host[0])), nil, config.Pos{File: "lb.yaml", Line: 1, Column: 1}); err == nil || !strings.HasPrefix(err.Error(), "lb.yaml:1:1: infrastructure") {
		t.Errorf("one more in the file: %v", err)
	}
}
