package e2e

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// h1Counters are the bytes h1's interface sent, with an FCS for each
// frame, and the frames.
func h1Counters(t *testing.T) (bytes, frames float64) {
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
	return links[0].Stats64.TX.Bytes + 4*links[0].Stats64.TX.Packets, links[0].Stats64.TX.Packets
}

// TestSFlow: the default lab's LBs export sFlow as the VCP's config says,
// 1 in 100 of the frames into their external ports, to pmacct's sfacctd
// on mon, and the samples' flows as IPFIX to its nfacctd; iperf3 sends
// from h1 to h3 for 5 s. sfacctd's bytes from h1 to h3, scaled by the
// sampling rate (-R), come within 10% of what h1 sent for them: the
// frames' bytes h1's interface counted, with their FCS (sFlow's frame
// length has it); the samples say the router's one agent address.
// nfacctd's come within 10% of h1's IP bytes. Both have the route out
// (port 12, next hop h3, /24) for at least 90% of the bytes. A PUT of an
// export to an LB by a host without the admin token is refused. The web view's top talkers
// put h1 to h3 first, within 15% of h1's bytes.
func TestSFlow(t *testing.T) {
	upDefaultLabWith(t, demo.Options{Prefixes: 300, SFlow: netip.MustParseAddrPort("10.0.0.40:6343"), SFlowRate: 100,
		IPFIX: netip.MustParseAddrPort("10.0.0.40:4739")})
	waitRouterExport(t)
	checkExportGuarded(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777) // the collectors may drop privileges to write
	sfacct := startCollector(t, "sfacctd", "6343", filepath.Join(dir, "sfacct.csv"))
	defer sfacct.stop()
	nfacct := startCollector(t, "nfacctd", "4739", filepath.Join(dir, "nfacct.csv"))
	defer nfacct.stop()
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
	bytesBefore, framesBefore := h1Counters(t)
	res, err := demo.Exec("h1", "iperf3", "-c", demo.H3, "-t", "5", "-J")
	bytesAfter, framesAfter := h1Counters(t)
	sent, frames := bytesAfter-bytesBefore, framesAfter-framesBefore
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
	// The LBs' last datagrams, the flow's IPFIX record once it is idle
	// (2 s), the collectors' last dumps.
	time.Sleep(4 * time.Second)
	sfacct.stop()
	nfacct.stop()
	checkTopTalkers(t, sent)

	// sFlow's frame lengths have the FCS; IPFIX's octets are the IP
	// packets: the frames less their Ethernet header and FCS.
	sf := sfacct.h1ToH3(t)
	t.Logf("iperf3 sent %.0f bytes of payload (%.0f retransmits), h1 %.0f bytes of frames; sfacctd counted %.0f bytes in %.0f packets from h1 to h3 (%.3f of h1's; %.3f with their route), agents %v",
		r.End.SumSent.Bytes, r.End.SumSent.Retransmits, sent, sf.bytes, sf.packets, sf.bytes/sent, sf.routed/sf.bytes, sf.exporters)
	if ratio := sf.bytes / sent; ratio < 0.9 || ratio > 1.1 {
		t.Errorf("sFlow's bytes over h1's: %.3f, want 1 ± 0.1\n%s", ratio, sfacct.tail())
	}
	if len(sf.exporters) != 1 || !sf.exporters["192.0.2.1"] {
		t.Errorf("the samples came from agents %v, want the router's one, 192.0.2.1", sf.exporters)
	}
	// The route is asked of a back-end at the flow's first samples: those
	// go without it.
	if share := sf.routed / sf.bytes; share < 0.9 {
		t.Errorf("%.3f of sFlow's bytes with the route out (port 12, next hop h3, /24), want at least 0.9\n%s", share, sfacct.tail())
	}
	ip := sent - 18*frames
	nf := nfacct.h1ToH3(t)
	t.Logf("nfacctd counted %.0f bytes in %.0f packets from h1 to h3 (%.3f of h1's %.0f bytes of IP packets; %.3f with their route), exporters %v",
		nf.bytes, nf.packets, nf.bytes/ip, ip, nf.routed/nf.bytes, nf.exporters)
	if ratio := nf.bytes / ip; ratio < 0.9 || ratio > 1.1 {
		t.Errorf("IPFIX's bytes over h1's: %.3f, want 1 ± 0.1\n%s", ratio, nfacct.tail())
	}
	if share := nf.routed / nf.bytes; share < 0.9 {
		t.Errorf("%.3f of IPFIX's bytes with the route out, want at least 0.9\n%s", share, nfacct.tail())
	}
	if s, err := demo.LBStatus("lb1"); err != nil || s.SFlow == nil || s.SFlow.IPFIX == nil || s.SFlow.IPFIX.Records == 0 || s.SFlow.IPFIX.SendErrors != 0 {
		t.Errorf("lb1's IPFIX export: %v %+v", err, s.SFlow)
	}
}

// collector is pmacct's sfacctd or nfacctd on mon, writing what it counts
// by source, destination, protocol, exporter, port out, next hop and
// destination prefix length to a CSV file each second: the ports, next
// hops and prefixes as the samples or records say them (*_net), sFlow's
// scaled by the sampling (renormalize).
type collector struct {
	cmd  *exec.Cmd
	name string
	out  string
	done bool
}

func startCollector(t *testing.T, name, port, out string) *collector {
	t.Helper()
	d := strings.TrimSuffix(name, "d") // sfacct, nfacct
	conf := fmt.Sprintf("daemonize: false\n%[1]sd_ip: 10.0.0.40\n%[1]sd_port: %[2]s\nplugins: print\nprint_output: csv\nprint_output_file: %[3]s\n"+
		"print_refresh_time: 1\nprint_output_file_append: true\naggregate: src_host,dst_host,proto,peer_src_ip,out_iface,peer_dst_ip,dst_mask\n"+
		"%[1]sd_net: %[4]s\nuse_ip_next_hop: true\n", d, port, out, map[string]string{"sfacct": "sflow", "nfacct": "netflow"}[d])
	if d == "sfacct" {
		conf += "sfacctd_renormalize: true\n"
	}
	path := out + ".conf"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &collector{name: name, out: out, cmd: exec.Command(msrBin, "lab", "exec", "--lab", demo.LabName, "mon", "--", name, "-f", path)}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *collector) stop() {
	if !c.done {
		c.done = true
		demo.Exec("mon", "pkill", "-INT", "-x", c.name)
		c.cmd.Wait()
	}
}

func (c *collector) tail() string {
	b, _ := os.ReadFile(c.out)
	return lastLines(string(b), 20)
}

// flowCount is what a collector counted of a flow: bytes, packets, those
// of the bytes with their route (out by lb2's e0, VLAN 12, to h3 on its
// /24), and the exporters that sent them (peer_src_ip).
type flowCount struct {
	bytes, packets, routed float64
	exporters              map[string]bool
}

// h1ToH3 sums the collector's counts of TCP from h1 to h3.
func (c *collector) h1ToH3(t *testing.T) flowCount {
	t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatalf("%s wrote nothing: %v", c.name, err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		t.Fatalf("%s's CSV: %v\n%s", c.name, err, b)
	}
	n := flowCount{exporters: map[string]bool{}}
	var header []string
	for _, row := range rows {
		if slices.Contains(row, "SRC_IP") {
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
			b, _ := strconv.ParseFloat(field("BYTES"), 64)
			n.bytes += b
			if field("OUT_IFACE") == "12" && field("PEER_DST_IP") == demo.H3 && field("DST_MASK") == "24" {
				n.routed += b
			}
			p, _ := strconv.ParseFloat(field("PACKETS"), 64)
			n.packets += p
			n.exporters[field("PEER_SRC_IP")] = true
		}
	}
	return n
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

// checkExportGuarded: a host of the interconnect (mon) that PUTs lb1 an
// export of its own, with no token or the read one, is refused (401,
// 403), and lb1 keeps the router's.
func checkExportGuarded(t *testing.T) {
	t.Helper()
	read, err := os.ReadFile(demo.APIFile("read.token"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"collectors":["10.0.0.40:9999"],"agent_address":"10.0.0.40","counter_interval_s":1}`
	for _, token := range []string{"", strings.TrimSpace(string(read))} {
		code, err := demo.Exec("mon", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", demo.APIFile("ca.crt"),
			"-X", "PUT", "-H", "Authorization: Bearer "+token, "--data", body, "https://10.0.0.31:8181"+lbapi.PathSFlow)
		if code != "401" && code != "403" {
			t.Errorf("mon's PUT %s to lb1 with a token %v: %q %v, want 401 or 403", lbapi.PathSFlow, token != "", code, err)
		}
	}
	s, err := demo.LBStatus("lb1")
	if err != nil || s.SFlow == nil || s.SFlow.Export == nil || s.SFlow.Export.From != lbapi.SFlowFromVCP || s.SFlow.Export.Collectors[0].Port() != 6343 {
		t.Errorf("lb1's export after mon's PUTs: %v %+v", err, s.SFlow)
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
