package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The local socket answers reads to every user of the host and changes
// only to root: a real client under another user (this test binary again,
// as nobody) reads the status and is refused a drain; root drains.
func TestLocalSocketPeers(t *testing.T) {
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
	cmd := exec.Command(client)
	cmd.Env = append(os.Environ(), "MSR_API_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the client as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"read: ok", "drain: this request changes the router: on the local socket it needs root", "own: this is the agent's own: on the local socket it needs root"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the client as nobody said\n%s\nwant %q", out, want)
		}
	}
	if changed != 0 || Refused.Load()-before != 2 {
		t.Errorf("nobody's drain and read of the agent's own: %d changes, %d refusals counted, want 0 and 2", changed, Refused.Load()-before)
	}
	var res map[string]int
	if err := NewClient(path, "test").Do("POST", "/drain", nil, &res); err != nil || changed != 1 {
		t.Errorf("root's drain: %v, %d changes", err, changed)
	}
	if err := NewClient(path, "test").Do("GET", "/own", nil, &res); err != nil || res["n"] != 2 {
		t.Errorf("root's read of the agent's own: %v, %v", err, res)
	}
}

// TestMain runs the package's tests, or in TestLocalSocketPeers's helper
// process (the test binary run again as another user, MSR_API_SOCKET set)
// its client alone.
func TestMain(m *testing.M) {
	if path := os.Getenv("MSR_API_SOCKET"); path != "" {
		localSocketClient(path)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// localSocketClient reads the status, asks for a drain and reads the
// agent's own at path, and prints what came of each.
func localSocketClient(path string) {
	c := NewClient(path, "test")
	var st map[string]int
	if err := c.Do("GET", "/status", nil, &st); err != nil || st["n"] != 1 {
		fmt.Printf("read: %v %v\n", st, err)
	} else {
		fmt.Println("read: ok")
	}
	var res map[string]int
	if err := c.Do("POST", "/drain", nil, &res); err != nil {
		fmt.Printf("drain: %v\n", err)
	} else {
		fmt.Println("drain: went through")
	}
	var own map[string]int
	if err := c.Do("GET", "/own", nil, &own); err != nil {
		fmt.Printf("own: %v\n", err)
	} else {
		fmt.Println("own: read")
	}
}

// serveTemp serves testMux on a socket in a temporary directory until the
// test ends, and returns its path.
func serveTemp(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	changed := 0
	go Serve(ctx, path, testMux(&changed))
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the API socket never appeared")
	return ""
}

// A client made per request (the demo's looks, the soak's ten a second)
// reuses the socket's one connection: before, each left a connection open
// for good, and a goroutine on each side of it (the soak found the VCPs
// at 150 goroutines more after 90 s).
func TestLocalClientsShareAConnection(t *testing.T) {
	path := serveTemp(t)
	before := runtime.NumGoroutine()
	for range 50 {
		var st map[string]int
		if err := NewClient(path, "test").Do("GET", "/status", nil, &st); err != nil {
			t.Fatal(err)
		}
	}
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Errorf("50 clients of one socket, a request each: %d goroutines more (one connection is 3)", grown)
	}
}

// The server closes a connection left idle (serverIdleTimeout), so that a
// client that never closes its own cannot pin a goroutine and a socket
// each.
func TestServerClosesIdleConnections(t *testing.T) {
	old := serverIdleTimeout
	serverIdleTimeout = 200 * time.Millisecond
	defer func() { serverIdleTimeout = old }()
	path := serveTemp(t)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /status HTTP/1.1\r\nHost: agent\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("an idle keep-alive connection: read %v after %v, want the server's close (EOF) after %v", err, time.Since(start), serverIdleTimeout)
	}
	t.Logf("closed by the server %v after its last answer", time.Since(start).Round(time.Millisecond))
}

// A client that sends a request's headers and then its body a byte at a
// time, or never, is cut off after serverReadTimeout: a slow sender holds
// no goroutine for good.
func TestServerCutsSlowRequests(t *testing.T) {
	old := serverReadTimeout
	serverReadTimeout = 300 * time.Millisecond
	defer func() { serverReadTimeout = old }()
	path := serveTemp(t)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /status HTTP/1.1\r\nHost: agent\r\nContent-Length: 1000\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	io.Copy(io.Discard, c) // whatever the server answers, until it closes
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a request whose body never came held its connection %v, want about %v", took, serverReadTimeout)
	}
}

// An API address in use is tried again for a while: a predecessor
// killed a moment ago may still hold it. One held for good is an error
// that names it.
func TestListenTCPWaitsForAddressInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := held.Addr().String()
	time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	ln, err := ListenTCP(addr)
	if err != nil {
		t.Fatalf("address freed 300 ms later: %v", err)
	}
	defer ln.Close()
	old := listenRetry
	listenRetry = 200 * time.Millisecond
	defer func() { listenRetry = old }()
	if _, err := ListenTCP(addr); !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "API address") {
		t.Errorf("address held for good: %v, want EADDRINUSE naming the API address", err)
	}
}
