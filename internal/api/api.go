// Package api is the agents' API transport: HTTP with JSON bodies on a
// Unix socket (local) and, where configured, on a TCP address of the
// management network (tcp.go), and its client. Each agent registers its own
// handlers.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// RunDir holds the agents' API sockets and run-time files on a host.
const RunDir = "/run/msr"

// SocketPath is the API socket of the agent of kind ("lb", "router",
// "vcp") named name, unless its config names another.
func SocketPath(kind, name string) string {
	return filepath.Join(RunDir, kind+"-"+name+".sock")
}

// Serve answers h's requests on the Unix socket path until ctx ends,
// then removes the socket. The socket is open to every local user (mode
// 0666), as the kernel's own state is to `ip` and `ss`: anyone on the host
// reads; a request that changes something needs its peer to be root or
// the agent's own user (SO_PEERCRED, localPeer), else 403, counted with the
// management API's refusals.
func Serve(ctx context.Context, path string, h http.Handler) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("API socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("API socket: %w", err)
	}
	go func() {
		<-ctx.Done()
		os.Remove(path)
	}()
	srv := newServer(ctx, localPeer(h))
	srv.ConnContext = withPeerUID
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// peerUIDKey is the context key of a Unix connection's peer's user id.
type peerUIDKey struct{}

// withPeerUID puts c's peer's user id (SO_PEERCRED) in its requests'
// context; without one (not a Unix socket, or the call failed) nothing,
// which localPeer takes for a stranger.
func withPeerUID(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerUIDKey{}, cred.Uid)
}

// Who names the client of a request that changed something, for a log
// or a history: a local user by name and id (the Unix socket's peer), or
// the management API's admin token and the address it came from.
func Who(r *http.Request) string {
	if uid, ok := r.Context().Value(peerUIDKey{}).(uint32); ok {
		if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
			return fmt.Sprintf("%s (uid %d) on the local socket", u.Username, uid)
		}
		return fmt.Sprintf("uid %d on the local socket", uid)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "the admin token from " + host
}

// localPeer lets reads (GET, HEAD) through from anyone and changes only
// from root or the agent's own user.
func localPeer(h http.Handler) http.Handler {
	return peerGate(h, func(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead },
		"this request changes the router: on the local socket it needs root (sudo)")
}

// OwnerOnly serves h on the local socket to root and the agent's own user
// only, reads too: what no other user may see (Go's profiles: a heap
// profile holds what the agent holds, its keys among it).
func OwnerOnly(h http.Handler) http.Handler {
	return peerGate(h, func(*http.Request) bool { return false }, "this is the agent's own: on the local socket it needs root (sudo)")
}

// peerGate serves h a request anyone may make (open) or one whose peer
// is root or the agent's own user; any other gets 403 saying why,
// counted with the management API's refusals.
func peerGate(h http.Handler, open func(*http.Request) bool, why string) http.Handler {
	self := uint32(os.Geteuid())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, ok := r.Context().Value(peerUIDKey{}).(uint32)
		if open(r) || ok && (uid == 0 || uid == self) {
			h.ServeHTTP(w, r)
			return
		}
		Refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "{\"error\":%q}\n", why)
	})
}

// serverIdleTimeout is how long the API keeps a client's idle
// keep-alive connection: a client that never closes its connections (a
// new transport per request did, the soak found: 150 goroutines more on
// each VCP after 90 s) must not pin a goroutine and a socket each for
// good. A var for the tests.
var serverIdleTimeout = time.Minute

// serverReadTimeout and serverWriteTimeout bound a request's body and its
// answer: a client that sends or reads a byte a minute holds a goroutine
// and a socket no longer than these. The write's is long enough for a
// full table's /routes at a slow client's pace. Vars for the tests.
var (
	serverReadTimeout  = 30 * time.Second
	serverWriteTimeout = 5 * time.Minute
)

// newServer is the API's HTTP server for h, closed when ctx ends.
func newServer(ctx context.Context, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: serverReadTimeout, WriteTimeout: serverWriteTimeout,
		IdleTimeout: serverIdleTimeout}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return srv
}

// serve answers on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	if err := newServer(ctx, h).Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Reply writes v as JSON, or err as {"error": ...} with status 400.
func Reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// Client talks to an agent's API on a Unix socket or a TCP address.
type Client struct {
	http  *http.Client
	what  string // the agent, for errors: "msr lb"
	base  string // "http://agent" on a Unix socket, "http://ADDR" on TCP
	token string // sent with every request when set (tcp.go)
}

// NewClient dials the agent named what on the Unix socket path. Clients
// of one socket share a transport (unixTransport): a program that makes
// a client per request (the demo's looks, ten a second) reuses one
// connection instead of leaving one open per client.
func NewClient(path, what string) *Client {
	return &Client{what: what, base: "http://agent", http: &http.Client{Timeout: 10 * time.Second, Transport: unixTransport(path)}}
}

// clientIdleTimeout is how long a client keeps an idle connection: less
// than serverIdleTimeout, so that the client, not the server, closes it
// (a request never races the server's close).
const clientIdleTimeout = 30 * time.Second

// unixTransports are the Unix sockets' transports, by path.
var unixTransports sync.Map

// unixTransport is the transport of the Unix socket path, made once.
func unixTransport(path string) *http.Transport {
	if t, ok := unixTransports.Load(path); ok {
		return t.(*http.Transport)
	}
	t, _ := unixTransports.LoadOrStore(path, &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
		IdleConnTimeout: clientIdleTimeout,
	})
	return t.(*http.Transport)
}

// Local is the client of the agent of kind named name on this host, on
// its socket (socket, or api.SocketPath's when socket is "").
func Local(kind, name, socket string) *Client {
	if socket == "" {
		socket = SocketPath(kind, name)
	}
	return NewClient(socket, "msr "+kind)
}

// Under is a client of the same agent whose paths all begin with prefix:
// what a relay serves (the VCP's /relay/ELEMENT).
func (c *Client) Under(prefix string) *Client {
	u := *c
	u.base += prefix
	u.what += " " + prefix
	return &u
}

// WithTimeout is the same client waiting up to d for an answer (10 s
// unless said): for a request that waits on purpose, as a trace does.
func (c *Client) WithTimeout(d time.Duration) *Client {
	u := *c
	h := *c.http
	h.Timeout = d
	u.http = &h
	return &u
}

// Do sends a request with body (JSON, or nil) and decodes the answer into
// out; an error answer becomes an error.
func (c *Client) Do(method, path string, body any, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	status, answer, err := c.Raw(method, path, b)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(answer, &e) != nil || e.Error == "" {
			return fmt.Errorf("%s: HTTP %d: %.200s", c.what, status, answer)
		}
		return errors.New(e.Error)
	}
	return json.Unmarshal(answer, out)
}

// Raw sends a request with a JSON body (or none) and returns the answer's
// status and body as they are: what a relay passes on.
func (c *Client) Raw(method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("is %s running? %w", c.what, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, answer, err
}

// maxAnswer bounds an answer a client reads: a full table's route list
// (600k routes) is ~60 MB of JSON.
const maxAnswer = 256 << 20

// AddrParam is the request's query parameter name as an IPv4 or IPv6
// address (no zone, not IPv4-mapped), or an error that says what was
// wrong.
func AddrParam(r *http.Request, name string) (netip.Addr, error) {
	s := r.URL.Query().Get(name)
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("%s %q: an IPv4 or IPv6 address", name, s)
	}
	return a, nil
}
