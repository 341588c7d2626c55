package agentx

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The subagent against the real master: net-snmp's snmpd on a loopback
// port, queried with net-snmp's snmpget, snmpgetnext and snmpbulkwalk,
// its notifications received by snmptrapd.

// freePort is a UDP port nothing listens on.
func freePort(t *testing.T) int {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// startDaemon runs argv until the test ends; its output goes to log.
func startDaemon(t *testing.T, log string, argv ...string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("%s:\n%s", filepath.Base(log), b)
		}
	})
}

// master starts snmpd with its AgentX socket in dir and the community
// "test"; traps go to trapPort. It returns the socket and snmpd's address.
func master(t *testing.T, dir string, trapPort int) (socket, addr string) {
	t.Helper()
	socket = filepath.Join(dir, "agentx.sock")
	addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := fmt.Sprintf(`[snmp] persistentDir %s
[snmp] mibs :
agentAddress udp:%s
master agentx
agentXSocket %s
rocommunity test 127.0.0.1
trap2sink 127.0.0.1:%d test
`, dir, addr, socket, trapPort)
	os.WriteFile(filepath.Join(dir, "snmpd.conf"), []byte(conf), 0o600)
	startDaemon(t, filepath.Join(dir, "snmpd.log"), "snmpd", "-f", "-Lo", "-C", "-c", filepath.Join(dir, "snmpd.conf"),
		"-I", "-system_mib,interface,ifTable,ifXTable", "-p", filepath.Join(dir, "snmpd.pid"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			return socket, addr
		}
		if time.Now().After(deadline) {
			t.Fatal("snmpd made no AgentX socket in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snmp runs a net-snmp client with numeric output and returns its output.
func snmp(t *testing.T, tool, addr string, args ...string) string {
	t.Helper()
	argv := append([]string{"-v2c", "-c", "test", "-On", "-t", "2", "-r", "1", addr}, args...)
	out, err := exec.Command(tool, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(argv, " "), err, out)
	}
	return string(out)
}

var (
	testTree = MustOID("1.3.6.1.4.1.99999.1")
)

// testVariables are a scalar of each type and a two-row table.
func testVariables() []VarBind {
	return []VarBind{
		{Name: testTree.Append(1, 0), Type: OctetString, Value: "router one"},
		{Name: testTree.Append(2, 0), Type: Integer, Value: int32(-7)},
		{Name: testTree.Append(3, 0), Type: Counter64, Value: uint64(1) << 40},
		{Name: testTree.Append(4, 0), Type: Gauge32, Value: uint32(10000)},
		{Name: testTree.Append(5, 0), Type: TimeTicks, Value: uint32(12345)},
		{Name: testTree.Append(6, 0), Type: IPAddress, Value: netip.MustParseAddr("192.0.2.1")},
		{Name: testTree.Append(7, 0), Type: ObjectIdentifier, Value: MustOID("1.3.6.1.6.3.1.1.5.3")},
		{Name: testTree.Append(8, 1, 10), Type: Counter32, Value: uint32(100)},
		{Name: testTree.Append(8, 1, 20), Type: Counter32, Value: uint32(200)},
		{Name: testTree.Append(8, 2, 10), Type: OctetString, Value: []byte("lb1/e0")},
		{Name: testTree.Append(8, 2, 20), Type: OctetString, Value: []byte("lb2/e0")},
	}
}

func TestSubagentWithSnmpd(t *testing.T) {
	dir := t.TempDir()
	trapPort := freePort(t)
	startDaemon(t, filepath.Join(dir, "snmptrapd.log"), "snmptrapd", "-f", "-Lo", "-C", "-c", writeFile(t, dir, "snmptrapd.conf", "disableAuthorization yes\n"),
		"-On", fmt.Sprintf("udp:127.0.0.1:%d", trapPort))
	socket, addr := master(t, dir, trapPort)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Dial(ctx, socket, MustOID("1.3.6.1.4.1.99999"), "msr agentx test", HandlerFunc(testVariables))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Register(testTree, 100); err != nil {
		t.Fatal(err)
	}

	get := snmp(t, "snmpget", addr, ".1.3.6.1.4.1.99999.1.1.0", ".1.3.6.1.4.1.99999.1.2.0", ".1.3.6.1.4.1.99999.1.3.0",
		".1.3.6.1.4.1.99999.1.6.0", ".1.3.6.1.4.1.99999.1.7.0", ".1.3.6.1.4.1.99999.1.9.0", ".1.3.6.1.4.1.99999.1.8.1.30")
	for _, want := range []string{
		`.1.3.6.1.4.1.99999.1.1.0 = STRING: "router one"`,
		`.1.3.6.1.4.1.99999.1.2.0 = INTEGER: -7`,
		`.1.3.6.1.4.1.99999.1.3.0 = Counter64: 1099511627776`,
		`.1.3.6.1.4.1.99999.1.6.0 = IpAddress: 192.0.2.1`,
		`.1.3.6.1.4.1.99999.1.7.0 = OID: .1.3.6.1.6.3.1.1.5.3`,
		`.1.3.6.1.4.1.99999.1.9.0 = No Such Object`,
		`.1.3.6.1.4.1.99999.1.8.1.30 = No Such Instance`,
	} {
		if !strings.Contains(get, want) {
			t.Errorf("snmpget: no %q in\n%s", want, get)
		}
	}
	next := snmp(t, "snmpgetnext", addr, ".1.3.6.1.4.1.99999.1.8.1.10", ".1.3.6.1.4.1.99999.1.5")
	if !strings.Contains(next, ".1.3.6.1.4.1.99999.1.8.1.20 = Counter32: 200") || !strings.Contains(next, ".1.3.6.1.4.1.99999.1.5.0 = Timeticks: (12345)") {
		t.Errorf("snmpgetnext:\n%s", next)
	}
	// A bulk walk of the subtree returns every variable, in order, once.
	walk := snmp(t, "snmpbulkwalk", addr, "-Cr3", ".1.3.6.1.4.1.99999.1")
	lines := strings.Split(strings.TrimSpace(walk), "\n")
	if len(lines) != len(testVariables()) {
		t.Fatalf("snmpbulkwalk: %d variables, want %d:\n%s", len(lines), len(testVariables()), walk)
	}
	for i, v := range newView(testVariables()) {
		if !strings.HasPrefix(lines[i], "."+v.Name.String()+" = ") {
			t.Errorf("walk line %d: %q, want %s", i, lines[i], v.Name)
		}
	}
	// Sets are refused.
	out, err := exec.Command("snmpset", "-v2c", "-c", "test", "-t", "2", "-r", "0", addr, ".1.3.6.1.4.1.99999.1.2.0", "i", "5").CombinedOutput()
	if err == nil {
		t.Errorf("snmpset succeeded: %s", out)
	}

	// A notification reaches snmptrapd through the master.
	if err := s.Notify(MustOID("1.3.6.1.6.3.1.1.5.3"), VarBind{Name: MustOID("1.3.6.1.2.1.2.2.1.1.10"), Type: Integer, Value: int32(10)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "snmptrapd.log"))
		if bytes.Contains(b, []byte(".1.3.6.1.6.3.1.1.5.3")) && bytes.Contains(b, []byte(".1.3.6.1.2.1.2.2.1.1.10 = INTEGER: 10")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no linkDown trap in snmptrapd's log:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := s.Ping(); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEncoding holds the encoder to RFC 2741's layouts: the internet
// prefix abbreviated, octet strings padded, values in network order.
func TestEncoding(t *testing.T) {
	b := appendOID(nil, MustOID("1.3.6.1.2.1.1.5.0"), true)
	want := []byte{4, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Errorf("OID: % x, want % x", b, want)
	}
	if b := appendOctets(nil, []byte("abcde")); !bytes.Equal(b, []byte{0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 0, 0, 0}) {
		t.Errorf("octets: % x", b)
	}
	for _, v := range testVariables() {
		enc, err := appendVarBind(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		r := reader{b: enc, o: binary.BigEndian}
		got := r.varBind()
		if r.err != nil || len(r.b) != 0 || got.Name.Compare(v.Name) != 0 || fmt.Sprint(got.Value) != fmt.Sprint(v.Value) && fmt.Sprint(got.Value) != fmt.Sprint([]byte(fmt.Sprint(v.Value))) {
			t.Errorf("%s: decoded %+v (err %v, %d left)", v.Name, got, r.err, len(r.b))
		}
	}
	if _, err := appendVarBind(nil, VarBind{Name: testTree, Type: Counter64, Value: 5}); err == nil {
		t.Error("an int as a Counter64 was encoded")
	}
}

// FuzzRequest feeds the session's request handling arbitrary PDUs: it
// answers or refuses, never panics.
func FuzzRequest(f *testing.F) {
	get := appendPDU(nil, header{Type: typeGetBulk, PacketID: 1}, append([]byte{0, 0, 0, 5},
		append(appendOID(nil, testTree, true), appendOID(nil, nil, false)...)...))
	f.Add(get)
	f.Add(appendPDU(nil, header{Type: typeGet, Flags: flagNonDefaultContext}, appendOctets(nil, []byte("ctx"))))
	f.Add(appendPDU(nil, header{Type: typeTestSet}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		payload := b[headerLen:]
		if uint32(len(payload)) > h.PayloadLen {
			payload = payload[:h.PayloadLen]
		}
		s := &Session{handler: HandlerFunc(testVariables)}
		s.serve(h, payload)
	})
}
