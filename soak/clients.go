package soak

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/demo"
)

// The soak's real clients (TCP alongside, and traffic from h3 to h1): beside the instrument's UDP from h1, every step runs
//   - iperf3's sequenced UDP from h3 to h1 (4 streams of 500 kbit/s in
//     500-byte datagrams: its server counts each datagram lost), whose
//     loss counts against the step as the instrument's does;
//   - an iperf3 TCP stream from h1 to h3 (10 Mbit/s): it must complete;
//   - HTTP downloads of a 256 KiB file from h3 to h1 (python3's
//     http.server, curl), one after another: each must complete, with the
//     file's sha256.
// They are light beside the instrument's 10,000 frames a second (DefaultRate), which
// they must not disturb: the two cores carry everything.

// Ports and sizes of the clients.
const (
	clientUDPPort   = "5211" // iperf3's server on h1, for h3's UDP
	clientTCPPort   = "5212" // iperf3's server on h3, for h1's TCP
	clientHTTPPort  = "8081" // http.server on h3
	clientFileBytes = 256 << 10
)

// soakClients are the clients' servers and their account over the soak.
type soakClients struct {
	dir string // the file served, in a directory of its own
	sum string // its sha256, hex

	mu         sync.Mutex
	downloads  int                 // completed with the right sha256
	failed     map[string][]string // by client (http, tcp, udp): what failed, when
	tcpBytes   uint64
	tcpRetr    int
	udpSent    uint64
	udpLost    uint64
	udpRcvbuf  uint64
	udpReorder uint64
}

// ClientsReport is the clients' account in the report.
type ClientsReport struct {
	// HTTP: downloads of a 256 KiB file from h3 to h1, each with its
	// sha256 checked; Failed those that did not complete or came back
	// wrong.
	Downloads int      `json:"http_downloads"`
	Failed    []string `json:"http_failed,omitempty"`
	// TCP: iperf3 from h1 to h3, a test a step.
	TCPBytes       uint64   `json:"tcp_bytes"`
	TCPRetransmits int      `json:"tcp_retransmits"`
	TCPFailed      []string `json:"tcp_failed,omitempty"`
	// UDP from h3 to h1: iperf3's datagrams sent, lost, out of order, and
	// the tests that failed.
	ReverseSent       uint64 `json:"reverse_udp_sent"`
	ReverseLost       uint64 `json:"reverse_udp_lost"`
	ReverseOutOfOrder uint64 `json:"reverse_udp_out_of_order"`
	// ReverseRcvbuf of ReverseLost were dropped by h1's kernel for a full
	// socket buffer: delivered by the router, read too late.
	ReverseRcvbuf uint64   `json:"reverse_udp_rcvbuf_dropped"`
	ReverseFailed []string `json:"reverse_udp_failed,omitempty"`
}

// startSoakClients starts the servers: iperf3 on h1 and h3, python3's
// http.server on h3 serving a file of random bytes.
func startSoakClients() (*soakClients, error) {
	dir, err := os.MkdirTemp("", "msr-soak-http-")
	if err != nil {
		return nil, err
	}
	os.Chmod(dir, 0o755)
	b := make([]byte, clientFileBytes)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(dir, "file"), b, 0o644); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	c := &soakClients{dir: dir, sum: hex.EncodeToString(sum[:]), failed: map[string][]string{}}
	for _, s := range [][]string{
		{"h1", "iperf3", "-s", "-D", "-p", clientUDPPort},
		{"h3", "iperf3", "-s", "-D", "-p", clientTCPPort},
		{"h3", "sh", "-c", "setsid python3 -m http.server " + clientHTTPPort + " --bind " + demo.H3 + " --directory " + dir + " >/dev/null 2>&1 < /dev/null &"},
	} {
		if _, err := demo.Exec(s[0], s[1:]...); err != nil {
			c.close()
			return nil, err
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := demo.Exec("h1", "curl", "-sf", "-o", "/dev/null", c.url()); err == nil {
			return c, nil
		} else if time.Now().After(deadline) {
			c.close()
			return nil, fmt.Errorf("soak clients: h3's http.server: %v", err)
		}
	}
}

func (c *soakClients) url() string { return "http://" + demo.H3 + ":" + clientHTTPPort + "/file" }

// close stops the servers.
func (c *soakClients) close() {
	demo.Exec("h1", "pkill", "-f", "iperf3 -s -D -p "+clientUDPPort)
	demo.Exec("h3", "pkill", "-f", "iperf3 -s -D -p "+clientTCPPort)
	demo.Exec("h3", "pkill", "-f", "http.server "+clientHTTPPort)
	os.RemoveAll(c.dir)
}

// clientStep is what the clients saw in one step.
type clientStep struct {
	udpSent, udpLost uint64
	// udpLostAt says in which seconds of the test (iperf3's intervals)
	// the datagrams were lost, and udpRcvbuf how many h1's kernel dropped
	// for a full socket buffer meanwhile (its UDP RcvbufErrors): the
	// receiving program's delay, not the router's loss.
	udpLostAt string
	udpRcvbuf uint64
	failed    []string // a download or a TCP test that failed
}

// run runs the clients for d (a step's traffic), and returns what they
// saw; at is the step's time in the soak, for the failures' text.
func (c *soakClients) run(d time.Duration, at time.Duration) clientStep {
	var st clientStep
	var wg sync.WaitGroup
	secs := fmt.Sprint(max(1, int(d.Round(time.Second)/time.Second)))
	wg.Add(3)
	go func() { // h3 -> h1, sequenced UDP
		defer wg.Done()
		rcvbuf := udpRcvbufErrors("h1")
		out, err := demo.Exec("h3", "iperf3", "-c", demo.H1, "-p", clientUDPPort, "-u", "-b", "500K", "-l", "500", "-P", "4", "-t", secs, "-J", "--get-server-output")
		var r struct {
			Error string `json:"error"`
			// The server's own account: only it knows a second's losses.
			Server string `json:"server_output_text"`
			End    struct {
				Sum struct {
					Packets     uint64 `json:"packets"`
					LostPackets uint64 `json:"lost_packets"`
					OutOfOrder  uint64 `json:"out_of_order"`
				} `json:"sum"`
			} `json:"end"`
		}
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil || r.Error != "" {
			c.fail(&st, "udp", fmt.Sprintf("at %.0f s, UDP h3 -> h1: %v %v %s", at.Seconds(), err, jerr, r.Error))
			return
		}
		st.udpRcvbuf = udpRcvbufErrors("h1") - rcvbuf
		st.udpLostAt = lostSeconds(r.Server)
		c.mu.Lock()
		st.udpSent, st.udpLost = r.End.Sum.Packets, r.End.Sum.LostPackets
		c.udpSent += r.End.Sum.Packets
		c.udpLost += r.End.Sum.LostPackets
		c.udpRcvbuf += min(st.udpRcvbuf, r.End.Sum.LostPackets)
		c.udpReorder += r.End.Sum.OutOfOrder
		c.mu.Unlock()
	}()
	go func() { // h1 -> h3, TCP
		defer wg.Done()
		out, err := demo.Exec("h1", "iperf3", "-c", demo.H3, "-p", clientTCPPort, "-b", "10M", "-t", secs, "-J")
		var r struct {
			Error string `json:"error"`
			End   struct {
				SumSent struct {
					Bytes       uint64 `json:"bytes"`
					Retransmits int    `json:"retransmits"`
				} `json:"sum_sent"`
			} `json:"end"`
		}
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil || r.Error != "" || r.End.SumSent.Bytes == 0 {
			c.fail(&st, "tcp", fmt.Sprintf("at %.0f s, TCP h1 -> h3: %v %v %s", at.Seconds(), err, jerr, r.Error))
			return
		}
		c.mu.Lock()
		c.tcpBytes += r.End.SumSent.Bytes
		c.tcpRetr += r.End.SumSent.Retransmits
		c.mu.Unlock()
	}()
	go func() { // HTTP from h3 to h1, one download after another
		defer wg.Done()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			// The body to a file, then its sum: curl's own exit status and
			// time are kept (a pipe into sha256sum hid a timeout as an
			// empty body's sum, runs 9 and 15).
			out, err := demo.Exec("h1", "sh", "-c", `f=$(mktemp) && curl -sf --max-time 10 -o "$f" -w '%{size_download} %{time_total}' `+c.url()+
				`; echo " $? $(sha256sum < "$f")"; rm -f "$f"`)
			var size int64
			var took float64
			var code int
			var got string
			fmt.Sscan(out, &size, &took, &code, &got)
			if err != nil || code != 0 || got != c.sum {
				c.fail(&st, "http", fmt.Sprintf("at %.0f s, HTTP h3 -> h1: curl exit %d after %.1f s, %d bytes, sha256 %q, want %s (%v)",
					at.Seconds(), code, took, size, got, c.sum, err))
				continue
			}
			c.mu.Lock()
			c.downloads++
			c.mu.Unlock()
		}
	}()
	wg.Wait()
	return st
}

// iperf3SumLine is a second of an iperf3 UDP server's text: "[SUM]
// 1.00-2.00 sec 244 KBytes 2.00 Mbits/sec 0.033 ms 3/500 (0.6%)".
var iperf3SumLine = regexp.MustCompile(`^\[SUM\]\s+([0-9.]+)-[0-9.]+\s+sec.*\s([0-9]+)/[0-9]+\s+\(`)

// lostSeconds reads an iperf3 UDP server's text for the seconds in which
// it counted datagrams lost: "3 in second 1, ..." (the end's summary,
// marked receiver, left out).
func lostSeconds(server string) string {
	var at []string
	for _, l := range strings.Split(server, "\n") {
		m := iperf3SumLine.FindStringSubmatch(l)
		if m == nil || strings.Contains(l, "receiver") || strings.Contains(l, "sender") {
			continue
		}
		if n, _ := strconv.Atoi(m[2]); n > 0 {
			at = append(at, fmt.Sprintf("%d in second %s", n, strings.TrimSuffix(strings.TrimSuffix(m[1], "0"), ".0")))
		}
	}
	return strings.Join(at, ", ")
}

// udpRcvbufErrors is host's kernel's count of UDP datagrams dropped for a
// full socket buffer (/proc/net/snmp's Udp RcvbufErrors, its namespace's).
func udpRcvbufErrors(host string) uint64 {
	out, err := demo.Exec(host, "cat", "/proc/net/snmp")
	if err != nil {
		return 0
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}

// fail records what failed of a client (http, tcp, udp).
func (c *soakClients) fail(st *clientStep, client, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.failed = append(st.failed, what)
	c.failed[client] = append(c.failed[client], what)
}

// report is the clients' account.
func (c *soakClients) report() *ClientsReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &ClientsReport{Downloads: c.downloads, Failed: c.failed["http"], TCPBytes: c.tcpBytes, TCPRetransmits: c.tcpRetr, TCPFailed: c.failed["tcp"],
		ReverseSent: c.udpSent, ReverseLost: c.udpLost, ReverseOutOfOrder: c.udpReorder, ReverseRcvbuf: c.udpRcvbuf, ReverseFailed: c.failed["udp"]}
}

// err joins a step's failures.
func (st clientStep) err() error {
	if len(st.failed) == 0 {
		return nil
	}
	return errors.New(strings.Join(st.failed, "; "))
}
