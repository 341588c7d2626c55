package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

var cliLab = msrtest.Testdata("t-cli.yaml")

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

// TestLabUpProcessFails: a lab whose process ends in its first second is
// refused, with what the process said, and rolled back; --keep-going
// keeps it up with a warning.
func TestLabUpProcessFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fail.yaml")
	os.WriteFile(file, []byte(`name: t-fail
hosts:
  a:
    processes:
      - {name: good, command: [sleep, "60"]}
      - {name: bad, command: [sh, -c, "echo no such config file >&2; exit 3"]}
`), 0o644)
	defer msr(t, "lab", "down", "t-fail")
	_, errOut, code := msr(t, "lab", "up", file)
	if code == 0 || !strings.Contains(errOut, "process bad on a") || !strings.Contains(errOut, "no such config file") || !strings.Contains(errOut, "--keep-going") {
		t.Errorf("up with a failing process: exit %d, %q", code, errOut)
	}
	if out, _, _ := msr(t, "lab", "list"); strings.Contains(out, "t-fail") {
		t.Errorf("the failed lab is still up: %q", out)
	}
	out, errOut, code := msr(t, "lab", "up", "--keep-going", file)
	if code != 0 || strings.TrimSpace(out) != "t-fail" || !strings.Contains(errOut, "warning: process bad on a") {
		t.Errorf("up --keep-going: exit %d, %q, %q", code, out, errOut)
	}
}

func TestErrorsAreForPeople(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("hosts:\n  h1:\n    interfacez: {}\n"), 0o644)
	// Lab files in the default lab's place (soak --lab, demo up --lab),
	// refused before anything is built or taken down.
	def, err := os.ReadFile("../../labs/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// lineOf is the line of the default lab's file where s begins.
	lineOf := func(s string) int {
		i := strings.Index(string(def), s)
		if i < 0 {
			t.Fatalf("labs/default.yaml has no %q", s)
		}
		return strings.Count(string(def[:i]), "\n") + 1
	}
	badLine := filepath.Join(t.TempDir(), "soak-lab.yaml")
	os.WriteFile(badLine, []byte(strings.Replace(string(def), "  h2:\n    interfaces:\n", "  h2:\n    interfaces: [\n", 1)), 0o644)
	noAgent := filepath.Join(t.TempDir(), "demo-lab.yaml")
	vcp2 := regexp.MustCompile(`\{name: vcp, command: \[[^]]*vcp2\.yaml, --standby\]\}`)
	if !vcp2.MatchString(string(def)) {
		t.Fatal("labs/default.yaml has no vcp2 agent")
	}
	os.WriteFile(noAgent, []byte(vcp2.ReplaceAllString(string(def), "{name: standby, command: [sleep, infinity]}")), 0o644)
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
		{[]string{"soak", "--lab", badLine}, 1, fmt.Sprintf("%s:%d:1: YAML syntax", badLine, lineOf("  h2:\n"))},
		{[]string{"demo", "up", "--lab", noAgent}, 1, fmt.Sprintf("%s:%d:5: host vcp2 has no process vcp", noAgent, lineOf("  vcp2:\n")+1)},
	}
	for _, c := range cases {
		out, errOut, code := msr(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("msr %v: exit %d, stdout %q, stderr %q; want exit %d and %q on stderr", c.args, code, out, errOut, c.code, c.want)
		}
	}
}

// What the kernel keeps from a user needs root; a status query, which only
// asks an agent's socket, does not.
func TestNeedsRoot(t *testing.T) {
	asNobody := func(args ...string) (int, string) {
		var errOut bytes.Buffer
		cmd := exec.Command(msrBin, args...)
		cmd.Stderr = &errOut
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), errOut.String()
	}
	for _, args := range [][]string{{"lab", "list"}, {"lb", "--config", "lb.yaml"}, {"router", "route", "add", "10.0.0.0/8", "via", "10.1.1.1", "--name", "r1"}, {"vcp", "drain", "r1", "--name", "vcp1"}} {
		if code, errOut := asNobody(args...); code != 1 || !strings.Contains(errOut, "needs root") {
			t.Errorf("msr %s as nobody: exit %d, %q; want 1 and needs root", strings.Join(args, " "), code, errOut)
		}
	}
	for _, args := range [][]string{{"lb", "status", "--name", "t-none"}, {"router", "--name", "t-none", "route", "list"}, {"vcp", "status", "-o", "json", "--socket", "/run/msr/t-none.sock"}} {
		if code, errOut := asNobody(args...); code != 1 || strings.Contains(errOut, "needs root") || !strings.Contains(errOut, "t-none") {
			t.Errorf("msr %s as nobody: exit %d, %q; want the agent's socket asked (and missing)", strings.Join(args, " "), code, errOut)
		}
	}
}

// Help is asked for, so it goes to stdout with exit 0: msr -h, msr help,
// msr help CMD, msr CMD -h (the usage), msr CMD SUB -h (the usage and
// every flag with its description); msr version names the commit.
func TestHelpAndVersion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"commands:", "  lab ", "  version "}},
		{[]string{"help"}, []string{"commands:"}},
		{[]string{"help", "lb"}, []string{"msr lb: ", "usage:", "msr lb --config"}},
		{[]string{"lb", "-h"}, []string{"msr lb: ", "usage:"}},
		{[]string{"lab", "--help"}, []string{"msr lab up FILE.yaml"}},
		{[]string{"lab", "up", "-h"}, []string{"flags:", "-o value", "output format: text or json"}},
		{[]string{"ctl", "status", "-h"}, []string{"flags:", "-api string", "the VCP's management API"}},
		{[]string{"version"}, []string{"msr ", "commit "}},
		{[]string{"--version"}, []string{"msr ", "commit "}},
	} {
		out, errOut, code := msr(t, c.args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) || errOut != "" {
				t.Errorf("msr %v: exit %d, stdout %q, stderr %q; want exit 0 and %q on stdout", c.args, code, out, errOut, w)
				break
			}
		}
	}
	if _, errOut, code := msr(t); code != 2 || !strings.Contains(errOut, "commands:") {
		t.Errorf("msr alone: exit %d, stderr %q; want the commands on stderr, exit 2", code, errOut)
	}
}

// --check reads a config file as the agent would and exits: 0 and
// "good", or 1 with the file's line and what is wrong; nothing starts.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	for _, c := range []struct {
		role, file string
		code       int
		want       string
	}{
		{"lb", write("lb.yaml", "name: lb1\nkey_file: k\nports:\n  i0: {role: internal}\n"), 0, "lb.yaml: good"},
		{"lb", write("lb-bad.yaml", "name: lb1\nkey_file: k\nports:\n  i0: {role: inside}\n"), 1, "lb-bad.yaml:4:7: port i0: role \"inside\""},
		{"router", write("r4.yaml", "name: r4\nkey_file: k\ninterface: eth0\n"), 0, "r4.yaml: good"},
		{"router", write("r-bad.yaml", "name: r4\nkey_file: k\ninterface: eth0\nacl:\n  - {action: maybe}\n"), 1, "r-bad.yaml:5:5: ACL rule: action \"maybe\""},
		{"vcp", write("vcp.yaml", "name: vcp1\nkey_file: k\ninterface: eth0\n"), 0, "vcp.yaml: good"},
		{"vcp", write("vcp-bad.yaml", "name: vcp1\nkey_file: k\ninterface: eth0\nmode: random\n"), 1, "mode \"random\""},
	} {
		out, errOut, code := msr(t, c.role, "--check", "--config", c.file)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("msr %s --check --config %s: exit %d, %q %q; want %d and %q", c.role, filepath.Base(c.file), code, out, errOut, c.code, c.want)
		}
	}
}

// TestClearToken: msr ctl sends a token over plain http to loopback only,
// unless told --insecure; with --ca, or without a token, anywhere.
func TestClearToken(t *testing.T) {
	for _, c := range []struct {
		addr, token, ca string
		insecure, ok    bool
	}{
		{"10.0.0.1:8179", "t", "", false, false},
		{"10.0.0.1:8179", "t", "", true, true},
		{"10.0.0.1:8179", "t", "/etc/msr/api/api.crt", false, true},
		{"10.0.0.1:8179", "", "", false, true},
		{"127.0.0.1:8179", "t", "", false, true},
		{"[::1]:8179", "t", "", false, true},
		{"localhost:8179", "t", "", false, true},
		{"[2001:db8::1]:8179", "t", "", false, false},
	} {
		if err := clearToken(c.addr, c.token, c.ca, c.insecure); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
