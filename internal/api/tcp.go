package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
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
// cannot have it fails at start.
func ListenTCP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("API address: %w", err)
	}
	return ln, nil
}

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
