// Package deploy holds what msr installs with: the systemd units, example
// configs and the Grafana dashboard; its test builds the Debian package
// (scripts/deb.sh, make deb) and installs it.
package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebPackage: the package holds a static msr, the units, the docs
// they point at, the examples and bash completion; dpkg -i installs it,
// the installed msr says its version, systemd accepts the units, and the
// examples pass msr's own --check. dpkg -r removes it again.
func TestDebPackage(t *testing.T) {
	out := t.TempDir()
	b, err := exec.Command("../scripts/deb.sh", out).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/deb.sh: %v\n%s", err, b)
	}
	deb := strings.TrimSpace(string(b[strings.LastIndexByte(strings.TrimSpace(string(b)), '\n')+1:]))
	list, err := exec.Command("dpkg-deb", "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, list)
	}
	for _, f := range []string{"./usr/bin/msr", "./lib/systemd/system/msr-lb@.service", "./lib/systemd/system/msr-router@.service",
		"./lib/systemd/system/msr-vcp@.service", "./usr/share/doc/msr/operations.md", "./usr/share/doc/msr/copyright",
		"./usr/share/msr/examples/vcp1.yaml", "./usr/share/msr/msr-router.json", "./usr/share/bash-completion/completions/msr"} {
		if !strings.Contains(string(list), f+"\n") {
			t.Errorf("the package lacks %s", f)
		}
	}
	x := t.TempDir()
	if b, err := exec.Command("dpkg-deb", "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, b)
	}
	f, err := elf.Open(filepath.Join(x, "usr/bin/msr"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("usr/bin/msr is dynamically linked (%v)", p.Type)
		}
	}
	f.Close()

	if b, err := exec.Command("dpkg", "-i", deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, b)
	}
	t.Cleanup(func() { exec.Command("dpkg", "-r", "msr").Run() })
	v, err := exec.Command("/usr/bin/msr", "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "msr ") {
		t.Errorf("msr version from the package: %v %q", err, v)
	}
	status, _ := exec.Command("dpkg-query", "-W", "-f", "${Status} ${Version}", "msr").CombinedOutput()
	if !strings.HasPrefix(string(status), "install ok installed") || !strings.Contains(string(v), strings.Fields(string(status))[3]) {
		t.Errorf("dpkg says %q, msr version %q", status, v)
	}
	for _, u := range []string{"msr-lb@", "msr-router@", "msr-vcp@"} {
		if b, err := exec.Command("systemd-analyze", "verify", "/lib/systemd/system/"+u+".service").CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u, err, b)
		}
	}
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	for kind, file := range map[string]string{"lb": "lb1.yaml", "router": "r1.yaml", "vcp": "vcp1.yaml"} {
		example, _ := os.ReadFile("/usr/share/msr/examples/" + file)
		path := filepath.Join(t.TempDir(), file)
		os.WriteFile(path, []byte(strings.ReplaceAll(string(example), "/etc/msr/key", key)), 0o644)
		if b, err := exec.Command("/usr/bin/msr", kind, "--check", "--config", path).CombinedOutput(); err != nil {
			t.Errorf("the example %s: %v\n%s", file, err, b)
		}
	}
}
