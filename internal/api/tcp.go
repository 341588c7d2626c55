package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"time"
)

// The API on the management network. Anyone who reaches the address may
// read (GET); anything else changes the router and must carry the token,
// "Authorization: Bearer TOKEN". The token is derived from the router's
// shared DIST key, so every element, the VCP and `msr ctl` (given the key
// file) agree on it with nothing more to distribute, and a key rollover
// changes it.

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

// ServeTCP answers h's requests on ln until ctx ends; requests other than
// GET without the token are refused (401).
func ServeTCP(ctx context.Context, ln net.Listener, token string, h http.Handler) error {
	return serve(ctx, ln, Authorize(token, h))
}

// Authorize lets GET requests through, and others only with the token.
func Authorize(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if r.Method != http.MethodGet && (token == "" || subtle.ConstantTimeCompare(got, want) != 1) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"this request changes the router: it needs the API token (msr ctl --key-file)"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// NewTCPClient talks to the API at the TCP address addr, sending token
// (empty: read only).
func NewTCPClient(addr, token, what string) *Client {
	return &Client{what: what, base: "http://" + addr, token: token,
		http: &http.Client{Timeout: 10 * time.Second}}
}
