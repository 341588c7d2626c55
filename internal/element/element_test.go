package element

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/config"
)

// TestAPIListenNeedsSecurity: an API on the management network takes TLS
// and tokens of its own, or the file must say api_insecure; on loopback
// it may go without.
func TestAPIListenNeedsSecurity(t *testing.T) {
	secured := api.Security{Cert: "/c.crt", Key: "/c.key", ReadTokenFile: "/r", AdminTokenFile: "/a"}
	for _, c := range []struct {
		listen   string
		sec      api.Security
		insecure bool
		ok       bool
	}{
		{"10.0.0.1:8179", api.Security{}, false, false},
		{"10.0.0.1:8179", api.Security{Cert: "/c.crt", Key: "/c.key"}, false, false}, // TLS, but the DIST key's token
		{"10.0.0.1:8179", secured, false, true},
		{"10.0.0.1:8179", api.Security{}, true, true},
		{"127.0.0.1:8179", api.Security{}, false, true},
		{"[::1]:8179", api.Security{}, false, true},
	} {
		cfg := Config{Name: "e", KeyFile: "/k", APIListen: netip.MustParseAddrPort(c.listen), APISecurity: c.sec, APIInsecure: c.insecure}
		err := cfg.Complete("lb", config.Pos{File: "lb.yaml", Line: 3, Column: 1})
		if (err == nil) != c.ok || err != nil && (!strings.Contains(err.Error(), "lb.yaml:3:") || !strings.Contains(err.Error(), "api_insecure")) {
			t.Errorf("api_listen %s, security %+v, insecure %v: %v, want ok %v", c.listen, c.sec, c.insecure, err, c.ok)
		}
	}
}
