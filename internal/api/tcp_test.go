package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testMux answers a read, a change, and the metrics.
func testMux(changed *int) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { Reply(w, map[string]int{"n": 1}, nil) })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("msr_up 1\n")) })
	mux.HandleFunc("POST /drain", func(w http.ResponseWriter, r *http.Request) { *changed++; Reply(w, map[string]int{}, nil) })
	mux.Handle("GET /own", OwnerOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { Reply(w, map[string]int{"n": 2}, nil) })))
	return mux
}

// Without api_security's tokens: reading needs nothing; a change needs
// the token of the same DIST key.
func TestManagementAPIToken(t *testing.T) {
	token := Token([]byte(strings.Repeat("k", 32)))
	if token == Token([]byte(strings.Repeat("j", 32))) || len(token) != 64 {
		t.Fatalf("token %q", token)
	}
	changed := 0
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ServeTCP(ctx, ln, &Access{Admin: token}, nil, testMux(&changed))
	addr := ln.Addr().String()

	var st map[string]int
	if err := NewTCPClient(addr, "", "test", nil).Do("GET", "/status", nil, &st); err != nil || st["n"] != 1 {
		t.Errorf("read without the token: %v %v", st, err)
	}
	var out map[string]int
	for _, tok := range []string{"", Token([]byte(strings.Repeat("j", 32))), token[:63]} {
		err := NewTCPClient(addr, tok, "test", nil).Do("POST", "/drain", nil, &out)
		if err == nil || !strings.Contains(err.Error(), "needs the admin token") {
			t.Errorf("a change with token %q: %v", tok, err)
		}
	}
	if changed != 0 {
		t.Fatalf("%d changes went through without the token", changed)
	}
	if err := NewTCPClient(addr, token, "test", nil).Do("POST", "/drain", nil, &out); err != nil || changed != 1 {
		t.Errorf("a change with the token: %v, %d changes", err, changed)
	}
}

// With api_security: TLS with the deployment's certificate (msr cert's),
// reads need the read token (the public metrics do not), changes the
// admin token; refusals are counted; a client that does not trust the
// certificate gets nothing.
func TestManagementAPISecurity(t *testing.T) {
	dir := t.TempDir()
	if err := MakeCredentials(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	sec := Security{Cert: filepath.Join(dir, "api.crt"), Key: filepath.Join(dir, "api.key"), CA: filepath.Join(dir, "ca.crt"), ReadTokenFile: filepath.Join(dir, "read.token"),
		AdminTokenFile: filepath.Join(dir, "admin.token"), Public: []string{"metrics"}}
	if err := sec.Check(); err != nil {
		t.Fatal(err)
	}
	access, err := sec.Access(Token([]byte(strings.Repeat("k", 32))))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := sec.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	trust, err := ClientTLS(sec.Trust())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := 0
	go ServeTCP(ctx, ln, access, tc, testMux(&changed))
	addr := ln.Addr().String()
	read, admin := access.Read, access.Admin
	before := Refused.Load()

	do := func(token, method, path string, secure bool) error {
		c := NewTCPClient(addr, token, "test", nil)
		if secure {
			c = NewTCPClient(addr, token, "test", trust)
		}
		var out any
		return c.Do(method, path, nil, &out)
	}
	for _, c := range []struct {
		token, method, path string
		ok                  bool
	}{
		{"", "GET", "/status", false},
		{"wrong-token-0123456789", "GET", "/status", false},
		{read, "GET", "/status", true},
		{admin, "GET", "/status", true},
		{read, "POST", "/drain", false},
		{admin, "POST", "/drain", true},
	} {
		if err := do(c.token, c.method, c.path, true); (err == nil) != c.ok {
			t.Errorf("%s %s with token %.6s...: %v, want ok %v", c.method, c.path, c.token, err, c.ok)
		}
	}
	if changed != 1 {
		t.Errorf("%d changes, want the admin's one", changed)
	}
	if n := Refused.Load() - before; n != 3 {
		t.Errorf("%d refusals counted, want 3", n)
	}
	// The public metrics: no token, still TLS.
	c := NewTCPClient(addr, "", "test", trust)
	if _, body, err := c.Raw("GET", "/metrics", nil); err != nil || !strings.Contains(string(body), "msr_up 1") {
		t.Errorf("public metrics: %v %q", err, body)
	}
	if err := do(admin, "GET", "/status", false); err == nil {
		t.Error("plain HTTP to the TLS API answered")
	}
	if err := NewTCPClient(addr, admin, "test", &tls.Config{MinVersion: tls.VersionTLS12}).Do("GET", "/status", nil, new(any)); err == nil {
		t.Error("a client that does not trust the deployment's certificate got an answer")
	}
	// Bad blocks are refused.
	for _, s := range []Security{{Cert: "x"}, {ReadTokenFile: "x"}, {Public: []string{"everything"}}} {
		if s.Check() == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	os.WriteFile(filepath.Join(dir, "short.token"), []byte("abc\n"), 0o600)
	if _, err := (&Security{ReadTokenFile: filepath.Join(dir, "short.token"), AdminTokenFile: sec.AdminTokenFile}).Access(""); err == nil {
		t.Error("a 3-character token accepted")
	}
}

// TestCredentialsCA: msr cert's CA signs the API's certificate, which a
// client trusting the CA takes for every management address; the API's
// certificate cannot sign: one it "signed" is refused. The keys are
// 0600, and running it again keeps what is there.
func TestCredentialsCA(t *testing.T) {
	dir := t.TempDir()
	if err := MakeCredentials(dir, []string{"10.0.0.1", "vcp1.example"}); err != nil {
		t.Fatal(err)
	}
	read := func(name string) *x509.Certificate {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		p, _ := pem.Decode(b)
		if p == nil {
			t.Fatalf("%s: no PEM", name)
		}
		c, err := x509.ParseCertificate(p.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, leaf := read("ca.crt"), read("api.crt")
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("ca.crt: CA %v, usage %b", ca.IsCA, ca.KeyUsage)
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Errorf("api.crt can sign: CA %v, usage %b", leaf.IsCA, leaf.KeyUsage)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"10.0.0.1", "vcp1.example"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("api.crt for %s under the CA: %v", name, err)
		}
	}
	// A certificate api.key signs is no certificate of the deployment's.
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key"))
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(t.TempDir(), "forged")
	os.MkdirAll(forged, 0o700)
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "forged"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true}
	if err := makeCert(filepath.Join(forged, "f.crt"), filepath.Join(forged, "f.key"), tmpl, time.Hour, leaf, kp.PrivateKey); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(forged, "f.crt"))
	p, _ := pem.Decode(b)
	f, _ := x509.ParseCertificate(p.Bytes)
	inter := x509.NewCertPool()
	inter.AddCert(leaf)
	if _, err := f.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: "10.0.0.1"}); err == nil {
		t.Error("a certificate signed by api.key verified under the CA")
	}
	for _, k := range []string{"ca.key", "api.key", "read.token", "admin.token"} {
		if fi, err := os.Stat(filepath.Join(dir, k)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", k, fi.Mode(), err)
		}
	}
	if err := MakeCredentials(dir, []string{"10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if again := read("ca.crt"); !again.Equal(ca) {
		t.Error("running it again replaced the CA")
	}
	// A certificate from before the CA (self-signed, as msr cert made
	// them) is made anew under it.
	old := &x509.Certificate{Subject: pkix.Name{CommonName: "old"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	if err := makeCert(filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key"), old, time.Hour, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := MakeCredentials(dir, []string{"10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := read("api.crt").Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.1"}); err != nil {
		t.Errorf("a self-signed api.crt from before the CA was kept: %v", err)
	}
}
