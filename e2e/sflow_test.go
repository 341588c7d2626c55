package e2e

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestSFlow: the default lab's LBs export sFlow as the VCP's config says,
// 1 in 100 of the frames into their external ports, to pmacct's sfacctd
// on mon; iperf3 sends
// from h1 to h3 for 5 s. The collector's bytes from h1 to h3, scaled by
// the sampling rate (-R), come within 10% to what h1 sent for them: the
// frames' bytes h1's interface counted, with their FCS (sFlow's frame
// length has it). The samples say the router's one agent address. The
// web view's top talkers put h1 to h3 first, within 15% of h1's bytes.
// h1Sent is the bytes h1's interface sent, with an FCS for each frame.
func h1Sent(t *testing.T) float64 {
	t.Helper()
	out, err := demo.Exec("h1", "ip", "-j", "-s", "link", "show", "eth0")
	var links []struct {
		Stats64 struct {
			TX struct{ Bytes, Packets float64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err != nil || json.Unmarshal([]byte(out), &links) != nil || len(links) != 1 {
		t.Fatalf("h1's counters: %v %q", err, out)
	}
	return links[0].Stats64.TX.Bytes + 4*links[0].Stats64.TX.Packets
}

func TestSFlow(t *testing.T) {
	upDefaultLabWith(t, demo.Options{Prefixes: 300, SFlow: netip.MustParseAddrPort("10.0.0.40:6343"), SFlowRate: 100})
	waitRouterExport(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777) // sfacctd may drop privileges to write
	out := filepath.Join(dir, "sfacct.csv")
	collector := exec.Command(msrBin, "lab", "exec", "--lab", demo.LabName, "mon", "--", "sfacctd", "-L", "10.0.0.40", "-l", "6343",
		"-P", "print", "-O", "csv", "-c", "src_host,dst_host,proto,peer_src_ip", "-R", "-r", "1", "-A", "-o", out)
	if err := collector.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		demo.Exec("mon", "pkill", "-INT", "-x", "sfacctd")
		collector.Wait()
	}
	defer stop()
	time.Sleep(time.Second)

	// sfacctd renormalizes by the sample pool's growth (the frames the
	// sampler saw since the last sample), a stream's first sample by its
	// whole pool: every frame since the LB started. A flood of pings from
	// h1 to h2 first takes that sample, so that the transfer's are counted
	// by what crossed the port while it ran.
	if _, err := demo.Exec("h1", "ping", "-f", "-c", "3000", "-q", demo.H2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	iperf3Server(t)
	sentBefore := h1Sent(t)
	res, err := demo.Exec("h1", "iperf3", "-c", demo.H3, "-t", "5", "-J")
	sent := h1Sent(t) - sentBefore
	if err != nil {
		t.Fatalf("iperf3: %v", err)
	}
	var r struct {
		End struct {
			SumSent struct {
				Bytes       float64 `json:"bytes"`
				Retransmits float64 `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil || r.End.SumSent.Bytes == 0 {
		t.Fatalf("iperf3's answer: %v %.200s", err, res)
	}
	time.Sleep(3 * time.Second) // the LBs' last datagrams, sfacctd's last dump
	stop()
	checkTopTalkers(t, sent)

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("sfacctd wrote nothing: %v", err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		t.Fatalf("sfacctd's CSV: %v\n%s", err, b)
	}
	var bytes, packets float64
	agents := map[string]bool{}
	var header []string
	for _, row := range rows {
		if len(row) > 0 && row[0] == "SRC_IP" || len(row) > 1 && row[1] == "SRC_IP" {
			header = row
			continue
		}
		field := func(name string) string {
			for i, h := range header {
				if h == name && i < len(row) {
					return row[i]
				}
			}
			return ""
		}
		if field("SRC_IP") == demo.H1 && field("DST_IP") == demo.H3 && field("PROTOCOL") == "tcp" {
			n, _ := strconv.ParseFloat(field("BYTES"), 64)
			bytes += n
			n, _ = strconv.ParseFloat(field("PACKETS"), 64)
			packets += n
			agents[field("PEER_SRC_IP")] = true
		}
	}
	t.Logf("iperf3 sent %.0f bytes of payload (%.0f retransmits), h1 %.0f bytes of frames; sfacctd counted %.0f bytes in %.0f packets from h1 to h3 (%.3f of h1's), agents %v",
		r.End.SumSent.Bytes, r.End.SumSent.Retransmits, sent, bytes, packets, bytes/sent, agents)
	if ratio := bytes / sent; ratio < 0.9 || ratio > 1.1 {
		t.Errorf("sFlow's bytes over h1's: %.3f, want 1 ± 0.1\n%s", ratio, lastLines(string(b), 20))
	}
	if len(agents) != 1 || !agents["192.0.2.1"] && !agents["10.0.0.31"] {
		t.Errorf("the samples came from agents %v, want the router's one, 192.0.2.1", agents)
	}
}

// waitRouterExport waits until both LBs export what the VCP's config
// says: the router's sflow section, in place of their files' (none), each
// of their external ports at 1 in 100.
func waitRouterExport(t *testing.T) {
	t.Helper()
	ports := map[string]int{"lb1": 2, "lb2": 1}
	start := time.Now()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ready := 0
		var last []string
		for lb, n := range ports {
			s, err := demo.LBStatus(lb)
			if err != nil {
				t.Fatal(err)
			}
			if x := s.SFlow; x != nil && x.Export != nil && x.Export.From == lbapi.SFlowFromVCP && len(x.Export.Rates) == n &&
				x.Export.AgentAddress == netip.MustParseAddr("192.0.2.1") {
				ready++
			}
			last = append(last, fmt.Sprintf("%s: %+v", lb, s.SFlow))
		}
		if ready == len(ports) {
			t.Logf("both LBs export the router's config %v after the lab is up", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the LBs do not export the router's sFlow config after 10 s: %v", last)
		}
	}
}

// checkTopTalkers: the VCP's view (what the web view draws) has h1 to h3
// first among the LBs' top talkers, its bytes within 15% of sent (h1's
// frames, with their FCS: the talkers' are without).
func checkTopTalkers(t *testing.T, sent float64) {
	t.Helper()
	var view vcpapi.View
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Second) {
		status, body, err := vcpapi.Local("vcp1", "").Raw("GET", vcpapi.PathView, nil)
		if err == nil && status == 200 && json.Unmarshal(body, &view) == nil && len(view.Talkers) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view has no top talkers: %v %d", err, status)
		}
	}
	top := view.Talkers[0]
	t.Logf("top talkers: %+v", view.Talkers)
	if top.Src != demo.H1 || top.Dst != demo.H3 || top.Proto != "tcp" {
		t.Fatalf("the top talker: %+v, want h1 to h3, tcp", top)
	}
	withFCS := float64(top.Bytes + 4*top.Frames)
	if ratio := withFCS / sent; ratio < 0.85 || ratio > 1.15 {
		t.Errorf("the top talker's bytes over h1's: %.3f, want 1 ± 0.15", ratio)
	}
}
