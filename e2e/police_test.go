package e2e

import (
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/traffic"
)

// TestControlPlanePolicing: h1 floods the router's address on its port
// with TCP SYNs to the BGP port and ICMP echo requests for 10 s, at 500,000
// packets a second or, on a machine whose instrument gives less, at
// floodShare of what it gives (measured first), and never under
// floodFloor. lb1's control-plane policing drops all but its rates, so the
// VCP's session with bgp1 never drops, its OSPF adjacency with ospf1 (on
// lb1 too) stays Full, h2's pings to the router's address all come back,
// and lb1 counts the flood it dropped per class.
func TestControlPlanePolicing(t *testing.T) {
	upDefaultLab(t, 100)
	flood := traffic.GenConfig{Ifname: "eth0", DstMAC: net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}, Size: 64, Flows: 256,
		Protos: []traffic.Proto{traffic.ProtoTCP, traffic.ProtoICMP}, Src: netip.MustParseAddr(demo.H1), DstPort: 179,
		Dsts: []netip.Addr{netip.MustParseAddr(demo.RouterAddr1)}, HasXDP: true}
	ceiling := floodCeiling(t, flood)
	rate := min(floodRate, floodShare*ceiling)
	if rate < floodFloor {
		t.Fatalf("precondition: h1's generator gives %.0f pps flat out on this machine; this test needs %.0f%% of it to be %d at least", ceiling, floodShare*100, floodFloor)
	}
	flood.Rate = rate
	ospfFull := regexp.MustCompile(`(?m)^198\.51\.100\.20\s+\d+\s+Full`)
	for deadline := time.Now().Add(30 * time.Second); bgpSince() == "" || !ospfFull.MatchString(birdc("show", "ospf", "neighbors")); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sessions not up before the flood:\n%s\n%s", birdc("show", "protocols"), birdc("show", "ospf", "neighbors"))
		}
	}
	since := bgpSince()
	before := policeOf(t, "lb1")

	pings := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h2", "ping", "-c", "100", "-i", "0.1", "-W", "1", demo.RouterAddr1)
		pings <- out
	}()
	// Watch the sessions while the flood lasts.
	watch := make(chan []string, 1)
	stop := make(chan struct{})
	go func() {
		var lost []string
		for {
			select {
			case <-stop:
				watch <- lost
				return
			case <-time.After(250 * time.Millisecond):
			}
			if s := bgpSince(); !sameTime(s, since) {
				lost = append(lost, "BGP with bgp1: "+strings.TrimSpace(birdc("show", "protocols", "peer0")))
			}
			if !ospfFull.MatchString(birdc("show", "ospf", "neighbors")) {
				lost = append(lost, "OSPF with ospf1 not Full: "+strings.TrimSpace(birdc("show", "ospf", "neighbors")))
			}
		}
	}()
	const d = 10 * time.Second
	var sent uint64
	var window time.Duration
	err := netns.Do(lab.Namespace(demo.LabName, "h1"), func() error {
		g, err := traffic.NewGenerator(flood)
		if err != nil {
			return err
		}
		defer g.Close()
		if err := g.ResetWindow(); err != nil {
			return err
		}
		sent, err = g.Blast(d)
		window = g.Window()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	lost := <-watch
	out := <-pings
	after := policeOf(t, "lb1")
	offered := float64(sent) / window.Seconds()
	t.Logf("h1 flooded %d SYNs and echo requests in %v (%.0f pps, %.0f asked, %.0f flat out); h2 -> router meanwhile: %s", sent, window.Round(time.Millisecond), offered, rate, ceiling, lastLine(out, "packets transmitted"))
	var dropped uint64
	for _, c := range lb.PoliceClassNames {
		a, b := after[c], before[c]
		t.Logf("  lb1 police %-5s passed %8d dropped: source %8d class %8d", c, a.Passed-b.Passed, a.DroppedSource-b.DroppedSource, a.DroppedClass-b.DroppedClass)
		dropped += a.DroppedSource - b.DroppedSource + a.DroppedClass - b.DroppedClass
	}
	if offered < floodFloor {
		t.Errorf("precondition: h1's generator offered %.0f pps (%.0f asked, %.0f flat out before): this machine gave the instrument less than the %d this test needs", offered, rate, ceiling, floodFloor)
	}
	for _, c := range []string{"bgp", "icmp"} {
		b, a := before[c], after[c]
		// What passes is the class's per-source rate for h1 (and a
		// burst), nowhere near the half of the flood it was sent.
		if a.DroppedSource-b.DroppedSource < sent/2*9/10 {
			t.Errorf("class %s: dropped %d of h1's %d", c, a.DroppedSource-b.DroppedSource, sent/2)
		}
		// Over the flood's own window: a loaded machine's generator
		// may take longer than d to send it (CI: 16.4 s for 10 s).
		limit := uint64(max(d, window).Seconds()+2) * a.PerSourcePPS
		if p := a.Passed - b.Passed; p > limit+a.Burst {
			t.Errorf("class %s: passed %d, more than its per-source %d pps", c, p, a.PerSourcePPS)
		}
	}
	for _, l := range lost {
		t.Error(l)
	}
	if !strings.Contains(out, " 0% packet loss") {
		t.Errorf("h2's pings to the router during the flood: %s", lastLine(out, "packets transmitted"))
	}
	t.Logf("lb1 dropped %d of the flood's %d packets", dropped, sent)
}

// The flood: floodRate, or floodShare of the generator's ceiling on a
// machine that gives less (the generator paced near its ceiling falls
// behind whenever its core is taken). floodFloor is the least that is
// still a flood to policing: each class gets half, 20 times the BGP
// class's per-source rate and 5 times its whole rate (lb.DefaultPolice),
// so that the drops asserted (90% of a class's half) are policing's.
const (
	floodRate  = 500_000
	floodShare = 0.8
	floodFloor = 200_000
)

// floodCeiling is what h1's generator of c builds flat out, in frames a
// second over one second: the instrument's ceiling on this machine.
func floodCeiling(t *testing.T, c traffic.GenConfig) float64 {
	t.Helper()
	c.Rate = 0
	var pps float64
	err := netns.Do(lab.Namespace(demo.LabName, "h1"), func() error {
		g, err := traffic.NewGenerator(c)
		if err != nil {
			return err
		}
		defer g.Close()
		if err := g.ResetWindow(); err != nil {
			return err
		}
		sent, err := g.Blast(time.Second)
		if w := g.Window(); w > 0 {
			pps = float64(sent) / w.Seconds()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pps
}

// birdc asks the default lab's first VCP's BIRD.
func birdc(args ...string) string {
	out, _ := exec.Command("birdc", append([]string{"-s", filepath.Join(demo.RunDir, "vcp1", "bird.ctl")}, args...)...).CombinedOutput()
	return string(out)
}

// bgpSince is when the default lab VCP's session with bgp1 (peer0)
// became Established, "" while it is not.
func bgpSince() string {
	// "peer0      BGP        ---        up     08:41:07.123  Established"
	for _, l := range strings.Split(birdc("show", "protocols", "peer0"), "\n") {
		if f := strings.Fields(l); len(f) >= 6 && f[0] == "peer0" && f[5] == "Established" {
			return f[4]
		}
	}
	return ""
}

// sameTime says whether two of BIRD's "since" times (15:04:05.000) are
// the same moment: BIRD derives them anew each time, a millisecond apart.
func sameTime(a, b string) bool {
	ta, errA := time.Parse("15:04:05.000", a)
	tb, errB := time.Parse("15:04:05.000", b)
	return errA == nil && errB == nil && ta.Sub(tb).Abs() < time.Second
}

// policeOf reads an LB's policing classes by name.
func policeOf(t *testing.T, lb string) map[string]lbapi.PoliceClass {
	t.Helper()
	s, err := demo.LBStatus(lb)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]lbapi.PoliceClass{}
	for _, c := range s.Police {
		m[c.Class] = c
	}
	if len(m) == 0 {
		t.Fatalf("%s reports no policing classes", lb)
	}
	return m
}
