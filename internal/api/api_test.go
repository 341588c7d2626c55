package api

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The local socket answers reads to every user of the host and changes
// only to root: a real client under another user (this test binary again,
// as nobody) reads the status and is refused a drain; root drains.
func TestLocalSocketPeers(t *testing.T) {
	if os.Getenv("MSR_API_SOCKET") != "" {
		return // the helper's run of this test: see TestLocalSocketClient
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it runs a client as another user")
	}
	dir, err := os.MkdirTemp("", "msr-api-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "t.sock")
	changed := 0 // the drains that went through
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, path, testMux(&changed))
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(path); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := Refused.Load()

	// The test binary, where nobody may run it (go test's is in root's
	// 0700 directory).
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(dir, "client")
	if err := os.WriteFile(client, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(client, "-test.run=^TestLocalSocketClient$", "-test.v")
	cmd.Env = append(os.Environ(), "MSR_API_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the client as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"read: ok", "drain: this request changes the router: on the local socket it needs root"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the client as nobody said\n%s\nwant %q", out, want)
		}
	}
	if changed != 0 || Refused.Load()-before != 1 {
		t.Errorf("nobody's drain: %d changes, %d refusals counted, want 0 and 1", changed, Refused.Load()-before)
	}
	var res map[string]int
	if err := NewClient(path, "test").Do("POST", "/drain", nil, &res); err != nil || changed != 1 {
		t.Errorf("root's drain: %v, %d changes", err, changed)
	}
}

// TestLocalSocketClient is TestLocalSocketPeers's client, run by it as
// another user; alone it does nothing.
func TestLocalSocketClient(t *testing.T) {
	path := os.Getenv("MSR_API_SOCKET")
	if path == "" {
		return
	}
	c := NewClient(path, "test")
	var st map[string]int
	if err := c.Do("GET", "/status", nil, &st); err != nil || st["n"] != 1 {
		t.Logf("read: %v %v", st, err)
	} else {
		t.Log("read: ok")
	}
	var res map[string]int
	if err := c.Do("POST", "/drain", nil, &res); err != nil {
		t.Logf("drain: %v", err)
	} else {
		t.Log("drain: went through")
	}
}
