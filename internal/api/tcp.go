package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// The API on the management network. With api_security's tokens
// (security.go), reads need the read token and changes the admin token,
// "Authorization: Bearer TOKEN", but for the public paths. Without them,
// anyone who reaches the address may read (GET), and anything else must
// carry the token derived from the router's shared DIST key, so that every
// element, the VCP and `msr ctl` (given the key file) agree on it with
// nothing more to distribute.

// Token is the management API token of the DIST key secret.
func Token(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("msr management API v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// ListenTCP opens the management API's address, so that an agent that
// cannot have it fails at start. An address in use is tried again for
// listenRetry: an agent restarted at once (kill -9 and a supervisor) may
// start while its predecessor's last threads still tear its memory down
// and hold its sockets (the soak: a back-end's new agent gave up, and the
// back-end stayed without one).
func ListenTCP(addr string) (net.Listener, error) {
	start := time.Now()
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Since(start) > listenRetry {
			return nil, fmt.Errorf("API address: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listenRetry is how long ListenTCP waits for an address in use.
var listenRetry = 3 * time.Second

// ServeTCP answers h's requests on ln until ctx ends, as access allows
// (401 otherwise), over TLS with tc when it is not nil.
func ServeTCP(ctx context.Context, ln net.Listener, access *Access, tc *tls.Config, h http.Handler) error {
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	return serve(ctx, ln, access.Authorize(h))
}

// NewTCPClient talks to the API at the TCP address addr, sending token
// (empty: read only where reads are open); over TLS trusting tc's roots
// when tc is not nil.
func NewTCPClient(addr, token, what string, tc *tls.Config) *Client {
	c := &Client{what: what, base: "http://" + addr, token: token, http: &http.Client{Timeout: 10 * time.Second}}
	if tc != nil {
		c.base = "https://" + addr
		c.http.Transport = &http.Transport{TLSClientConfig: tc, IdleConnTimeout: clientIdleTimeout}
	}
	return c
}
