package vcp

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/lb/lbapi"
)

// TestSFlowConfig: the sflow section and the ports' rates make each live
// LB's export: the rate of its external ports by MAC (the section's, or
// the port's own; 0 none), the first port's address as the agent's; no
// export from a standby; without the section, the LBs with an API back to
// their own. Bad lines are refused with their line number.
func TestSFlowConfig(t *testing.T) {
	text := strings.Replace(goodVCP, `vlan: 11, mtu: 1500}`, `vlan: 11, mtu: 1500, sflow_rate: 0}`, 1) +
		"sflow:\n  collectors: [\"10.0.0.40:6343\"]\n  sampling_rate: 100\n"
	c, err := load(t, text)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: c, elements: topology{}, active: true}
	port := func(mac string) dist.PortStatus {
		m, _ := net.ParseMAC(mac)
		return dist.PortStatus{MAC: m}
	}
	a.elements[1] = &element{alive: true, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb1", Ports: []dist.PortStatus{port("02:00:00:00:e0:00"), port("02:00:00:00:e0:01")}}}
	a.elements[2] = &element{alive: true, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb2", Ports: []dist.PortStatus{port("02:00:00:00:e2:00")}}}
	a.elements[3] = &element{alive: false, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb3"}}
	want := func(rates map[string]uint32) *lbapi.SFlowExport {
		return &lbapi.SFlowExport{Collectors: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.40:6343")},
			AgentAddress: netip.MustParseAddr("192.0.2.1"), CounterInterval: 20, Rates: rates}
	}
	got := a.sflowWanted()
	if len(got) != 2 || got[0].lb != "lb1" || !got[0].export.Same(want(map[string]uint32{"02:00:00:00:e0:00": 100})) ||
		got[1].lb != "lb2" || !got[1].export.Same(want(map[string]uint32{})) {
		t.Errorf("wanted %+v %+v", got[0].export, got[1].export)
	}
	a.active = false
	if got := a.sflowWanted(); len(got) != 0 {
		t.Errorf("a standby wants %+v", got)
	}
	a.active, a.cfg.SFlow = true, nil
	if got := a.sflowWanted(); len(got) != 0 {
		t.Errorf("without a section, no LB with an API: %+v, want none asked", got)
	}
	a.cfg.LBs["lb1"] = &LBConfig{API: netip.MustParseAddrPort("10.0.0.31:8181")}
	if got := a.sflowWanted(); len(got) != 1 || got[0].lb != "lb1" || got[0].export != nil {
		t.Errorf("without a section: %+v, want lb1 (with an API) to its own", got)
	}

	for _, c := range []struct{ text, want string }{
		{strings.Replace(text, "sampling_rate: 100", "sampling_rate: 100\n  sub_agent: 3", 1), ":13:3: sflow sub_agent"},
		{strings.Replace(text, "10.0.0.40:6343", "224.0.0.9:6343", 1), ":13:3: sflow collector 224.0.0.9:6343: a unicast ADDR:PORT"},
		{strings.Replace(text, "sampling_rate: 100", "counter_interval: 2h", 1), ":13:3: sflow counter_interval 2h0m0s: 1s to 1h"},
		{strings.Replace(goodVCP, `vlan: 11, mtu: 1500}`, `vlan: 11, mtu: 1500, sflow_rate: 10}`, 1), ":9:5: sflow_rate without an sflow section"},
		{strings.Replace(text, `sflow_rate: 0}`, `sflow_rate: 2000000000}`, 1), ":9:5: sflow_rate 2000000000: at most"},
	} {
		if _, err := load(t, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// TestSyncSFlowOf: against an LB's API (a fake that keeps what it is
// given), the VCP PUTs the router's export where the LB has its file's,
// leaves an LB that has it alone, PUTs again where it differs, and
// DELETEs it when the config has none.
func TestSyncSFlowOf(t *testing.T) {
	var got *lbapi.SFlowExport
	file := &lbapi.SFlowExport{From: lbapi.SFlowFromFile, Collectors: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.50:6343")}}
	got = file
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method)
		switch r.Method {
		case "PUT":
			var x lbapi.SFlowExport
			if err := json.NewDecoder(r.Body).Decode(&x); err != nil || x.From != "" {
				http.Error(w, "bad export", http.StatusBadRequest)
				return
			}
			x.From = lbapi.SFlowFromVCP
			got = &x
		case "DELETE":
			got = file
		}
		json.NewEncoder(w).Encode(got)
	}))
	defer srv.Close()
	c, err := load(t, goodVCP)
	if err != nil {
		t.Fatal(err)
	}
	c.LBs["lb1"] = &LBConfig{API: netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))}
	a := &Agent{cfg: c, elements: topology{}, active: true, log: slog.New(slog.DiscardHandler)}
	a.elements[1] = &element{alive: true, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb1"}}
	want := &lbapi.SFlowExport{Collectors: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.40:6343")}, AgentAddress: netip.MustParseAddr("192.0.2.1"),
		CounterInterval: 20, Rates: map[string]uint32{"02:00:00:00:e0:00": 100}}
	steps := []struct {
		want  *lbapi.SFlowExport
		calls string
	}{
		{want, "GET PUT"}, // the file's in force: the router's put
		{want, "GET"},     // the same: left alone
		{&lbapi.SFlowExport{Collectors: want.Collectors, AgentAddress: want.AgentAddress, CounterInterval: 5}, "GET PUT"},
		{nil, "GET DELETE"}, // no section: taken back
		{nil, "GET"},        // the file's: left alone
	}
	for i, s := range steps {
		calls = nil
		if err := a.syncSFlowOf("lb1", s.want); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if strings.Join(calls, " ") != s.calls {
			t.Errorf("step %d: %v, want %s", i, calls, s.calls)
		}
	}
	if got != file {
		t.Errorf("at the end the LB has %+v, want its file's", got)
	}
}
