package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Reading needs nothing; a change needs the token of the same key.
func TestManagementAPIToken(t *testing.T) {
	token := Token([]byte(strings.Repeat("k", 32)))
	if token == Token([]byte(strings.Repeat("j", 32))) || len(token) != 64 {
		t.Fatalf("token %q", token)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { Reply(w, map[string]int{"n": 1}, nil) })
	changed := 0
	mux.HandleFunc("POST /drain", func(w http.ResponseWriter, r *http.Request) { changed++; Reply(w, map[string]int{}, nil) })
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ServeTCP(ctx, ln, token, mux)
	addr := ln.Addr().String()

	var st map[string]int
	if err := NewTCPClient(addr, "", "test").Do("GET", "/status", nil, &st); err != nil || st["n"] != 1 {
		t.Errorf("read without the token: %v %v", st, err)
	}
	var out map[string]int
	for _, tok := range []string{"", Token([]byte(strings.Repeat("j", 32))), token[:63]} {
		err := NewTCPClient(addr, tok, "test").Do("POST", "/drain", nil, &out)
		if err == nil || !strings.Contains(err.Error(), "needs the API token") {
			t.Errorf("a change with token %q: %v", tok, err)
		}
	}
	if changed != 0 {
		t.Fatalf("%d changes went through without the token", changed)
	}
	if err := NewTCPClient(addr, token, "test").Do("POST", "/drain", nil, &out); err != nil || changed != 1 {
		t.Errorf("a change with the token: %v, %d changes", err, changed)
	}
}
