package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestTrace: `msr ctl trace` follows one packet through the default lab's
// stages while a client sends it, and says what each did: a UDP
// datagram from h1 to h3 balanced by lb1 (its slot and back-end), routed
// by that back-end (route, next hop, TTL 64 -> 63, out on h3's VLAN) and
// sent out of lb2's e0; a TCP SYN from h3 to h1's port 23, which the
// router's ACL denies at the back-end; a ping from h1 with TTL 1, which
// the back-end hands to its slow path (time exceeded); a ping to an
// address on h3's network where no host answers ARP, which the back-end
// hands to its slow path to resolve. Each walk's stages are in time
// order, and -o json says the same. A trace the data paths cannot match
// is refused, at the console and at an element's own API.
func TestTrace(t *testing.T) {
	upDefaultLab(t, 10)
	type walkJSON struct {
		Walks    []trace.Walk
		Elements []string
		Errors   []string
	}
	run := func(send func(), args ...string) trace.Walk {
		t.Helper()
		done, stop := make(chan struct{}), make(chan struct{})
		start := time.Now()
		var sends []string // when each send ended, for a trace that caught nothing
		go func() {
			defer close(done)
			// Again until the trace ends: the trace is on once the
			// console's call reaches every element.
			for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(150 * time.Millisecond) {
				send()
				sends = append(sends, time.Since(start).Round(time.Millisecond).String())
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		out, errOut, code := msr(t, append([]string{"ctl", "--name", "vcp1", "trace", "--wait", "6s", "-o", "json"}, args...)...)
		answered := time.Since(start)
		close(stop)
		<-done
		if code != 0 {
			t.Fatalf("msr ctl trace %v: exit %d: %s", args, code, errOut)
		}
		var res walkJSON
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("trace -o json: %v\n%s", err, out)
		}
		if len(res.Walks) != 1 || len(res.Elements) != 5 || len(res.Errors) != 0 {
			t.Fatalf("trace %v: %d walks at %v (not: %v), want 1 at the 2 LBs and 3 back-ends; the console answered after %v, the packets were sent by %v:\n%s",
				args, len(res.Walks), res.Elements, res.Errors, answered.Round(time.Millisecond), sends, out)
		}
		w := res.Walks[0]
		for i := 1; i < len(w.Stages); i++ {
			if w.Stages[i].At.Before(w.Stages[i-1].At) {
				t.Errorf("trace %v: stage %d before stage %d: %+v", args, i, i-1, w.Stages)
			}
		}
		text, _, _ := msr(t, append([]string{"ctl", "--name", "vcp1", "trace", "--wait", "1s"}, args...)...)
		t.Logf("msr ctl trace %s:\n%+v\n(text, no packet sent: %s)", strings.Join(args, " "), w, strings.TrimSpace(text))
		return w
	}

	stage := func(w trace.Walk, i int, kind, verdict string) trace.Event {
		t.Helper()
		if i >= len(w.Stages) {
			t.Fatalf("%s: %d stages, want a %s stage %d (%s)", w.Packet, len(w.Stages), kind, i, verdict)
		}
		e := w.Stages[i]
		if e.Kind != kind || e.Verdict != verdict {
			t.Errorf("%s: stage %d: %s %s (%s), want %s %s", w.Packet, i, e.Kind, e.Verdict, e.Reason, kind, verdict)
		}
		return e
	}

	// Forwarded.
	w := run(func() { demo.Exec("h1", "bash", "-c", "echo trace > /dev/udp/"+demo.H3+"/5000") },
		"--src", demo.H1, "--dst", demo.H3, "--proto", "udp", "--dport", "5000")
	in := stage(w, 0, "lb", "sent")
	if in.Element != "lb1" || in.In != "e0" || !regexp.MustCompile(`^balance: slot \d+ of the flowlet table, to r[123] `).MatchString(in.Decision) {
		t.Errorf("lb1's stage: %+v", in)
	}
	be := stage(w, 1, "router", "sent")
	if !strings.HasPrefix(in.Decision[strings.Index(in.Decision, "to ")+3:], be.Element) {
		t.Errorf("lb1 balanced to %q, but %s routed it", in.Decision, be.Element)
	}
	if be.TTL != 63 || be.VLAN != 12 || be.Out != "vlan 12" || !strings.Contains(be.Decision, "route 203.0.113.0/24") || !strings.Contains(be.Decision, "ttl 64 -> 63") {
		t.Errorf("the back-end's stage: %+v", be)
	}
	out := stage(w, 2, "lb", "sent")
	if out.Element != "lb2" || out.Out != "e0" || !out.Leaves || w.Ends != "left by lb2 e0" {
		t.Errorf("lb2's stage: %+v; the walk ends %q", out, w.Ends)
	}

	// Denied by the ACL (deny tcp to 192.0.2.0/24 port 23).
	w = run(func() { demo.Exec("h3", "timeout", "0.1", "bash", "-c", "echo > /dev/tcp/"+demo.H1+"/23") },
		"--src", demo.H3, "--dst", demo.H1, "--proto", "tcp", "--dport", "23")
	stage(w, 0, "lb", "sent")
	if e := stage(w, 1, "router", "dropped"); e.Reason != "acl" || len(w.Stages) != 2 || !strings.HasSuffix(w.Ends, ": acl") {
		t.Errorf("the denied SYN: %+v, ends %q", w.Stages, w.Ends)
	}

	// TTL 1: the back-end's slow path answers time exceeded.
	w = run(func() { demo.Exec("h1", "ping", "-c", "1", "-W", "0.1", "-t", "1", demo.H3) },
		"--src", demo.H1, "--dst", demo.H3, "--proto", "icmp")
	stage(w, 0, "lb", "sent")
	if e := stage(w, 1, "router", "slow_path"); e.Reason != "ttl" || e.TTL != 1 || len(w.Stages) != 2 {
		t.Errorf("the ping with TTL 1: %+v", w.Stages)
	}

	// No neighbour: 203.0.113.99 answers no ARP.
	const nobody = "203.0.113.99"
	w = run(func() { demo.Exec("h1", "ping", "-c", "1", "-W", "0.1", nobody) },
		"--src", demo.H1, "--dst", nobody, "--proto", "icmp")
	stage(w, 0, "lb", "sent")
	if e := stage(w, 1, "router", "slow_path"); e.Reason != "unresolved" || !strings.Contains(e.Decision, "connected on vlan 12") {
		t.Errorf("the ping to nobody: %+v", w.Stages)
	}

	// The web view shows the last walks, newest first.
	status, body, err := vcpapi.Local("vcp1", "").Raw("GET", vcpapi.PathView, nil)
	var view vcpapi.View
	if err != nil || status != 200 || json.Unmarshal(body, &view) != nil || len(view.Traces) != 4 || !strings.Contains(view.Traces[0].Packet, nobody) {
		t.Errorf("the web view's traces: %v %d %+v", err, status, view.Traces)
	}

	// Refused: what no data path can match, or more than a trace follows.
	for _, args := range [][]string{
		{"--src", demo.H1, "--dst", "2001:db8::1"},
		{"--src", demo.H1, "--dst", demo.H3, "--count", "1000"},
		{"--src", demo.H1, "--dst", demo.H3, "--proto", "icmp", "--dport", "53"},
	} {
		if _, errOut, code := msr(t, append([]string{"ctl", "--name", "vcp1", "trace"}, args...)...); code == 0 || errOut == "" {
			t.Errorf("trace %v: exit %d %s, want refused", args, code, errOut)
		}
	}
	for _, body := range []string{`{"id": 7, "src": "192.0.2.10", "dst": "203.0.113.10", "count": 0}`, `{"id": 7, "src": "x"}`, `[`} {
		if out, errOut, code := msr(t, "ctl", "--name", "vcp1", "element", "r1", "POST", trace.Path, body); code == 0 {
			t.Errorf("r1 took a trace of %s: %s %s", body, out, errOut)
		}
	}
	capture, _, _ := msr(t, "ctl", "--name", "vcp1", "element", "r1", "GET", trace.Path)
	var c trace.Capture
	if err := json.Unmarshal([]byte(capture), &c); err != nil || c.Spec != nil {
		t.Errorf("r1 after the refused traces: %s (%v), want none on", capture, err)
	}
}
