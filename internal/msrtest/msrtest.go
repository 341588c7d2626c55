// Package msrtest builds the msr binary for tests that run it as a
// program (the CLI's tests, e2e/), and runs it.
package msrtest

import (
	"bytes"
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
