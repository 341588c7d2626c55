package router

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/msr-router/msr/internal/flow"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/lb"
)

// The stages hash flows independently. Behind an LB whose hash table holds
// two equal back-ends, the flows that reach one back-end must still split
// evenly over its 2-way ECMP: with one hash at both stages they all had the
// same hash parity, and every one of them went to the same next hop. Each
// stage is run in the kernel (its XDP program) and in its model, flow by
// flow.
func TestECMPIndependentOfLBHash(t *testing.T) {
	const flows = 8000
	frames := lbFramesToBackend(t, flows)
	if n := len(frames); n < flows*45/100 || n > flows*55/100 {
		t.Fatalf("the LB sent %d of %d flows to back-end A: its table is not an even split", n, flows)
	}

	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	all := netip.MustParsePrefix("0.0.0.0/1")
	if err := s.dp.FIB.Set(all, 4); err != nil { // group 4: next hops 1 and 2, both resolved
		t.Fatal(err)
	}
	s.m.Routes[all] = 4
	perNbr := map[string]int{}
	for _, f := range frames {
		copy(f[0:6], macSelf)
		want, err := s.compare(f, false)
		if err != nil {
			t.Fatalf("kernel and model differ on %x: %v", f, err)
		}
		if want.Verdict != XDPTx {
			t.Fatalf("not forwarded (verdict %d, slow %d): %x", want.Verdict, want.Slow, f)
		}
		perNbr[net.HardwareAddr(want.Out[0:6]).String()]++
	}
	a := perNbr[macNbr[0].String()]
	if len(perNbr) != 2 || a < len(frames)*45/100 || a > len(frames)*55/100 {
		t.Errorf("2-way ECMP behind the LB's hash split %d flows as %v, want each within 45-55%%", len(frames), perNbr)
	}

	// The same chain with the LB's seed at the back-end too: every flow
	// on one next hop. This is what separate seeds prevent.
	same := map[uint32]int{}
	for _, f := range frames {
		same[flow.OfIPv4(f[14:], 20, lb.FlowSeed)%2]++
	}
	if len(same) != 1 {
		t.Errorf("with one seed for both stages the split is %v; the test no longer shows the correlation", same)
	}
}

// lbFramesToBackend sends flows random UDP flows from outside through an
// LB (kernel and model) whose hash table holds back-ends A and B with equal
// weights, and returns the frames the LB sent to A, as they left it.
func lbFramesToBackend(t *testing.T, flows int) [][]byte {
	t.Helper()
	spec, _ := labtest.Up(t, `name: t-ecmp
hosts:
  lb:
    interfaces:
      e0: {mac: "02:00:00:00:e0:00"}
      i0: {mac: "02:00:00:00:10:00"}
  peer: {}
links:
  - ends: [lb:e0, peer:e0]
  - ends: [lb:i0, peer:i0]
`)
	backendA, backendB := net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}, net.HardwareAddr{2, 0, 0, 0, 0xb0, 2}
	var toA [][]byte
	err := netns.Do(lab.Namespace(spec.Name, "lb"), func() error {
		dp, err := lb.LoadDataplane("", false)
		if err != nil {
			return err
		}
		defer dp.Close()
		m := &lb.Model{Ports: map[int]lb.Port{}, RouterAddrs: map[netip.Addr]uint32{}}
		var ports []lb.Port
		for i, name := range []string{"e0", "i0"} {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			p := lb.Port{Ifindex: ifi.Index, Index: uint8(i), Role: lb.RoleInternal, MAC: ifi.HardwareAddr}
			if name == "e0" {
				p.Role, p.VLAN, p.Addr = lb.RoleExternal, 10, netip.MustParseAddr("192.0.2.1")
			}
			if err := dp.SetPort(p); err != nil {
				return err
			}
			m.Ports[p.Ifindex] = p
			ports = append(ports, p)
		}
		m.Config = lb.Config{DefaultIntIfindex: ports[1].Ifindex}
		if err := dp.SetConfig(m.Config); err != nil {
			return err
		}
		table, err := lb.BuildTable(lb.ModeHash, []lb.Backend{
			{MAC: backendA, Ifindex: ports[1].Ifindex, PortIndex: 1, Weight: 1},
			{MAC: backendB, Ifindex: ports[1].Ifindex, PortIndex: 1, Weight: 1}})
		if err != nil {
			return err
		}
		if err := dp.InstallTable(table); err != nil {
			return err
		}
		m.Table = *table
		r := rand.New(rand.NewPCG(7, 7))
		for range flows {
			src := netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + r.IntN(200))})
			dst := netip.AddrFrom4([4]byte{byte(11 + r.IntN(80)), byte(r.IntN(256)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
			frame := ethFrame(ports[0].MAC, net.HardwareAddr{2, 0, 0, 0, 0xaa, 1}, 0x0800,
				ipPacket(src, dst, 17, 64, 0, udpPayload(uint16(1024+r.IntN(60000)), uint16(1+r.IntN(65535)), 18)))
			want := m.Process(ports[0].Ifindex, frame)
			ret, out, err := dp.Run(ports[0].Ifindex, frame)
			if err != nil {
				return err
			}
			if int(ret) != want.Verdict || !bytes.Equal(out[:len(want.Out)], want.Out) {
				return fmt.Errorf("the LB's kernel and model differ on %x: verdict %d, model %d", frame, ret, want.Verdict)
			}
			if bytes.Equal(want.Out[0:6], backendA) {
				toA = append(toA, want.Out)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return toA
}
