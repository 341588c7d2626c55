package lb

import (
	"encoding/binary"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb/lbapi"
)

// sflowSeen is what a test collector read of the datagrams: flow samples
// (their rate, input ifIndex and frame length) and the last counters of
// each ifIndex (frames in).
type sflowSeen struct {
	datagrams, flows int
	rates, inputs    map[uint32]int
	countersIn       map[uint32]uint32
	agent            netip.Addr
}

// readSFlow decodes sFlow v5 datagrams as far as the test needs, failing
// the test on anything malformed (from any goroutine: Errorf, then stop).
func readSFlow(t *testing.T, c *net.UDPConn, d time.Duration) *sflowSeen {
	t.Helper()
	s := &sflowSeen{rates: map[uint32]int{}, inputs: map[uint32]int{}, countersIn: map[uint32]uint32{}}
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(d); ; {
		c.SetReadDeadline(deadline)
		n, err := c.Read(buf)
		if err != nil {
			return s
		}
		b := buf[:n]
		bad := false
		u32 := func(at int) uint32 {
			if at+4 > len(b) {
				if !bad {
					t.Errorf("datagram of %d bytes: read past its end at %d", len(b), at)
				}
				bad = true
				return 0
			}
			return binary.BigEndian.Uint32(b[at:])
		}
		if u32(0) != 5 || u32(4) != 1 {
			t.Errorf("datagram version %d, agent address type %d", u32(0), u32(4))
			return s
		}
		s.agent = netip.AddrFrom4([4]byte(b[8:12]))
		s.datagrams++
		samples, at := u32(24), 28
		for range samples {
			format, length := u32(at), int(u32(at+4))
			body := at + 8
			switch format {
			case 1: // flow sample
				s.flows++
				s.rates[u32(body+8)]++
				s.inputs[u32(body+20)]++
			case 2: // counter sample: one if_counters record, from body+20
				s.countersIn[u32(body+20)] = u32(body + 20 + 32) // ifIndex; ifInUcastPkts

			default:
				t.Errorf("sample format %d", format)
				return s
			}
			if at = body + length; bad {
				return s
			}
		}
		if at != len(b) {
			t.Errorf("datagram of %d bytes, its samples end at %d", len(b), at)
			return s
		}
	}
}

// TestLBSFlow: with sflow configured, the LB samples 1 in 10 of what its
// external port e0 takes in and sends the samples, and e0's counters each
// second, to the collector as sFlow v5 from the agent address: the
// samples scaled by the rate come to the frames sent (within 5σ of the
// binomial draw), each from ifIndex 10 (e0's VLAN), and e0's counters
// count every frame.
func TestLBSFlow(t *testing.T) {
	cfg := lbConfig(t, "hash")
	var collector *net.UDPConn
	cfg.SFlow = &SFlowConfig{AgentAddress: netip.MustParseAddr("192.0.2.1"), SubAgent: 7, CounterInterval: time.Second}
	const rate = 10
	cfg.Ports[0].SFlowRate = rate
	// The collector listens in the LB's namespace, on its loopback.
	l := startAgentLabWithHook(t, cfg, func() {
		err := netns.Do(lab.Namespace("t-lbagent", "lb"), func() (err error) {
			collector, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.SFlow.Collectors = []netip.AddrPort{collector.LocalAddr().(*net.UDPAddr).AddrPort()}
	})
	defer collector.Close()
	// Read while the frames go: a second's datagrams overflow a socket's
	// buffer left unread.
	seenc := make(chan *sflowSeen, 1)
	go func() { seenc <- readSFlow(t, collector, 3*time.Second) }()
	sent := l.send(time.Second, 20_000)
	seen := <-seenc
	t.Logf("sent %d frames; %d datagrams, %d flow samples, rates %v, inputs %v, counters %v", sent, seen.datagrams, seen.flows, seen.rates, seen.inputs, seen.countersIn)
	want := float64(sent) / rate
	if sigma := math.Sqrt(float64(sent) * (1.0 / rate) * (1 - 1.0/rate)); math.Abs(float64(seen.flows)-want) > 5*sigma {
		t.Errorf("%d samples of %d frames at 1 in %d, want %.0f ± %.0f", seen.flows, sent, rate, want, 5*sigma)
	}
	if seen.rates[rate] != seen.flows || seen.inputs[10] != seen.flows || seen.agent != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("samples: rates %v, inputs %v, agent %v", seen.rates, seen.inputs, seen.agent)
	}
	if in := seen.countersIn[10]; uint64(in) < sent {
		t.Errorf("e0's counters: %d frames in, %d sent", in, sent)
	}
	if st := l.agent.Status().SFlow; st == nil || st.Samples != uint64(seen.flows) || st.Lost != 0 || st.SendErrors != 0 {
		t.Errorf("the LB's sflow status %+v, the collector got %d samples", st, seen.flows)
	}

	// The router's export, as the VCP sets it: e0 at 1 in 4, the agent
	// address its own. Hostile PUTs first: each refused and counted, the
	// export in force unchanged.
	e0 := l.agent.ports[0].mac.String()
	col := cfg.SFlow.Collectors[0]
	for _, body := range []string{
		`{"collectors":["` + col.String() + `"],"agent_address":"192.0.2.9","counter_interval_s":1,"rates":{"02:00:00:00:99:99":4}}`,
		`{"collectors":["224.0.0.1:6343"],"agent_address":"192.0.2.9","counter_interval_s":1}`,
		`{"collectors":["` + col.String() + `"],"agent_address":"0.0.0.0","counter_interval_s":1}`,
		`{"collectors":["` + col.String() + `"],"agent_address":"192.0.2.9","counter_interval_s":0}`,
		`{"collectors":["` + col.String() + `"],"agent_address":"192.0.2.9","counter_interval_s":1,"rates":{"` + e0 + `":4294967295}}`,
		`{"collectors":["` + col.String() + `"],"agent_address":"192.0.2.9","counter_interval_s":1,"from":"file"}`,
		`{"collectors":["` + col.String() + `"],"agent_address":"192.0.2.9","counter_interval_s":1,"unknown":1}`,
		`{"collectors":`,
	} {
		if code, _ := sflowAPI(l.agent, "PUT", body); code != http.StatusBadRequest {
			t.Errorf("PUT %s: %d, want 400", body, code)
		}
	}
	st := l.agent.Status().SFlow
	if st == nil || st.Refused != 8 || st.Export.From != lbapi.SFlowFromFile || l.agent.ports[0].sflowRate != rate {
		t.Fatalf("after hostile PUTs: %+v, e0 at 1 in %d", st, l.agent.ports[0].sflowRate)
	}
	body := `{"collectors":["` + col.String() + `"],"agent_address":"192.0.2.9","counter_interval_s":1,"rates":{"` + strings.ToUpper(e0) + `":4}}`
	if code, answer := sflowAPI(l.agent, "PUT", body); code != http.StatusOK || !strings.Contains(answer, `"from":"vcp"`) {
		t.Fatalf("PUT the router's export: %d %s", code, answer)
	}
	go func() { seenc <- readSFlow(t, collector, 3*time.Second) }()
	sent = l.send(time.Second, 20_000)
	seen = <-seenc
	want = float64(sent) / 4
	if sigma := math.Sqrt(float64(sent) * 0.25 * 0.75); math.Abs(float64(seen.flows)-want) > 5*sigma || seen.rates[4] != seen.flows || seen.agent != netip.MustParseAddr("192.0.2.9") {
		t.Errorf("the router's export: %d samples of %d frames, rates %v, agent %v; want %.0f ± %.0f at 1 in 4 from 192.0.2.9", seen.flows, sent, seen.rates, seen.agent, want, 5*sigma)
	}
	if code, answer := sflowAPI(l.agent, "DELETE", ""); code != http.StatusOK || !strings.Contains(answer, `"from":"file"`) || l.agent.ports[0].sflowRate != rate {
		t.Errorf("DELETE: %d %s, e0 at 1 in %d", code, answer, l.agent.ports[0].sflowRate)
	}
}

// sflowAPI asks the agent's API at PathSFlow.
func sflowAPI(a *Agent, method, body string) (int, string) {
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, httptest.NewRequest(method, lbapi.PathSFlow, strings.NewReader(body)))
	return w.Code, w.Body.String()
}
