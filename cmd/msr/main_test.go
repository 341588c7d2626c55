package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
)

var msrBin string

func TestMain(m *testing.M) { msrtest.Main(m, ".", &msrBin) }

// msr runs the binary and returns stdout, stderr and the exit status.
func msr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return msrtest.Run(t, msrBin, args...)
}

const cliLab = `name: t-cli
hosts:
  a:
    interfaces:
      eth0: {addresses: [10.7.0.1/24]}
  b:
    interfaces:
      eth0: {addresses: [10.7.0.2/24]}
links:
  - ends: [a:eth0, b:eth0]
`

func TestLabCommands(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cli.yaml")
	os.WriteFile(file, []byte(cliLab), 0o644)

	out, errOut, code := msr(t, "lab", "up", file)
	if code != 0 || strings.TrimSpace(out) != "t-cli" {
		t.Fatalf("lab up: %d %q %q", code, out, errOut)
	}
	t.Cleanup(func() { msr(t, "lab", "down", "t-cli") })

	out, _, code = msr(t, "lab", "status", "t-cli", "-o", "json")
	var st struct {
		Name  string `json:"name"`
		Nodes []struct {
			Name       string `json:"name"`
			Present    bool   `json:"present"`
			Interfaces []struct {
				Name      string   `json:"name"`
				Addresses []string `json:"addresses"`
			} `json:"interfaces"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status -o json is not one JSON document (%v, exit %d):\n%s", err, code, out)
	}
	if st.Name != "t-cli" || len(st.Nodes) != 2 || !st.Nodes[0].Present || st.Nodes[0].Interfaces[0].Addresses[0] != "10.7.0.1/24" {
		t.Errorf("status = %+v", st)
	}

	// Exit status passes through. With one lab up, --lab is not needed;
	// other packages' tests may have labs up at the same time, and then
	// the error must name them all.
	ping := []string{"a", "--", "ping", "-c", "1", "-w", "5", "10.7.0.2"}
	o, e, code := msr(t, append([]string{"lab", "exec"}, ping...)...)
	if code != 0 && strings.Contains(e, "labs are up (") && strings.Contains(e, "t-cli") && strings.Contains(e, "name one with --lab") {
		o, e, code = msr(t, append([]string{"lab", "exec", "--lab", "t-cli"}, ping...)...)
	}
	if code != 0 {
		t.Errorf("ping from a to b: exit %d\n%s%s", code, o, e)
	}
	if _, _, code := msr(t, "lab", "exec", "--lab", "t-cli", "b", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Errorf("exec exit status = %d, want 3", code)
	}
	out, _, _ = msr(t, "lab", "list", "-o", "json")
	var names []string
	if err := json.Unmarshal([]byte(out), &names); err != nil || len(names) == 0 {
		t.Errorf("lab list -o json = %q (%v)", out, err)
	}

	if _, errOut, code := msr(t, "lab", "up", file); code == 0 || !strings.Contains(errOut, "already up") {
		t.Errorf("second up: exit %d, %q", code, errOut)
	}
	if _, errOut, code := msr(t, "lab", "down", "t-cli"); code != 0 {
		t.Fatalf("down: %d %s", code, errOut)
	}
	if _, errOut, code := msr(t, "lab", "status", "t-cli"); code == 0 || !strings.Contains(errOut, "no such lab is up") {
		t.Errorf("status after down: exit %d, %q", code, errOut)
	}
}

func TestErrorsAreForPeople(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("hosts:\n  h1:\n    interfacez: {}\n"), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lab", "up", bad}, 1, bad + ":3:5: unknown key \"interfacez\""},
		{[]string{"lab", "up"}, 2, "lab up takes one FILE.yaml"},
		{[]string{"lab", "frobnicate"}, 2, "unknown lab subcommand"},
		{[]string{"nosuch"}, 2, "unknown command \"nosuch\""},
		{[]string{"bench", "fwd", "--dut", "cisco"}, 1, "unknown DUT \"cisco\""},
		{[]string{"bench", "fwd", "--size", "20"}, 1, "frame size 20"},
		{[]string{"lab", "status", "-o", "yaml"}, 2, "output format \"yaml\""},
	}
	for _, c := range cases {
		out, errOut, code := msr(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("msr %v: exit %d, stdout %q, stderr %q; want exit %d and %q on stderr", c.args, code, out, errOut, c.code, c.want)
		}
	}
}

func TestNeedsRoot(t *testing.T) {
	var errOut bytes.Buffer
	cmd := exec.Command(msrBin, "lab", "list")
	cmd.Stderr = &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(errOut.String(), "needs root") {
		t.Errorf("msr lab list as nobody: %v, %q", err, errOut.String())
	}
}
