// Package msrtest builds the msr binary for tests that run it as a
// program (the CLI's tests, e2e/), and runs it.
package msrtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the msr command (the package at pkg, such as "." or
// "../cmd/msr") into a fresh directory that anyone may read (a test may
// run it as nobody), and returns the binary and a function that removes
// it.
func Build(pkg string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "msr-bin")
	if err != nil {
		return "", nil, err
	}
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "msr")
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, errors.New(string(out))
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Main builds the binary into *bin, runs the tests and exits with their
// status: a test package's TestMain.
func Main(m *testing.M, pkg string, bin *string) {
	b, remove, err := Build(pkg)
	if err != nil {
		panic(err)
	}
	*bin = b
	code := m.Run()
	remove()
	os.Exit(code)
}

// Run runs bin with args and returns its stdout, stderr and exit status;
// a binary that cannot be started fails the test.
func Run(t testing.TB, bin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// Testdata is the file testdata/name of the package under test, for a
// package-level variable: a lab topology or a config that a test reads as
// it would a user's file. A missing file panics, failing every test.
func Testdata(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Log is an io.Writer of progress lines into the test's log.
type Log struct{ T testing.TB }

func (l Log) Write(p []byte) (int, error) {
	l.T.Log(string(p))
	return len(p), nil
}

// UDPCapture wraps a datagram in a UDP/IPv4/Ethernet frame to port, in a
// one-frame capture file (pcap) for a decoder such as tshark to read.
func UDPCapture(t *testing.T, port uint16, payload []byte) string {
	t.Helper()
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 10, 0, 0, 9}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	eth := append([]byte{2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x08, 0x00}, append(ip, udp...)...)
	var b bytes.Buffer
	for _, v := range []uint32{0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	for _, v := range []uint32{0, 0, uint32(len(eth)), uint32(len(eth))} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.Write(eth)
	path := filepath.Join(t.TempDir(), "udp.pcap")
	os.WriteFile(path, b.Bytes(), 0o644)
	return path
}
