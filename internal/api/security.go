package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// The management API's security, as an element's `api_security:` says:
// TLS with a certificate the deployment's CA signed (`msr cert` makes the
// CA and one certificate naming every management address; the CA is what
// clients trust, and only its key signs), and two random tokens that are
// not the DIST key — a read token for GETs and an admin token for
// everything. Some GET paths may be
// public (the metrics, the web view). Without tokens the API is as it
// was: reads open, changes with the token of the DIST key (tcp.go).

// Security is the `api_security:` block of every element's file.
type Security struct {
	Cert string `yaml:"cert"` // PEM; with key: the API speaks TLS
	Key  string `yaml:"key"`
	// CA is what this element trusts of the others' APIs (the VCP's
	// clients): the deployment's CA certificate. Absent: Cert itself.
	CA             string   `yaml:"ca"`
	ReadTokenFile  string   `yaml:"read_token_file"`
	AdminTokenFile string   `yaml:"admin_token_file"`
	Public         []string `yaml:"public"` // metrics, view: GETs that need no token
}

// publicPaths are what Security.Public names.
var publicPaths = map[string][]string{
	"metrics": {"/metrics"},
	"view":    {"/", "/web/", "/view"},
}

// Check says what is wrong with s (its files are read when loaded).
func (s *Security) Check() error {
	if (s.Cert == "") != (s.Key == "") {
		return errors.New("api_security: cert and key together")
	}
	if (s.ReadTokenFile == "") != (s.AdminTokenFile == "") {
		return errors.New("api_security: read_token_file and admin_token_file together")
	}
	for _, p := range s.Public {
		if publicPaths[p] == nil {
			return fmt.Errorf("api_security: public %q: metrics or view", p)
		}
	}
	return nil
}

// Refused counts the API's requests refused in this process, for want of
// a valid token on the management network (401) or of root on the local
// socket (403): msr_api_refused_requests_total.
var Refused atomic.Uint64

// Access is who may do what on the management API.
type Access struct {
	// Read lets GETs through; Admin everything. With Read empty, GETs
	// need no token (the API without api_security tokens).
	Read, Admin string
	// Public are GET paths (exact, or prefixes ending in /) anyone may read.
	Public []string
}

// Access reads the tokens of s; without them, admin is the DIST key's
// token and reads are open.
func (s *Security) Access(distToken string) (*Access, error) {
	a := &Access{Admin: distToken}
	if s.ReadTokenFile != "" {
		var err error
		if a.Read, err = readToken(s.ReadTokenFile); err != nil {
			return nil, err
		}
		if a.Admin, err = readToken(s.AdminTokenFile); err != nil {
			return nil, err
		}
		if a.Read == a.Admin {
			return nil, errors.New("api_security: the read and admin tokens must differ")
		}
	}
	for _, p := range s.Public {
		a.Public = append(a.Public, publicPaths[p]...)
	}
	return a, nil
}

// readToken reads a token file: one line of at least 16 characters.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 || strings.ContainsAny(t, " \t\n") {
		return "", fmt.Errorf("api token %s: one word of at least 16 characters", path)
	}
	return t, nil
}

// public says whether anyone may GET path.
func (a *Access) public(path string) bool {
	for _, p := range a.Public {
		if path == p || strings.HasSuffix(p, "/") && p != "/" && strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// Authorize lets a request through if its token allows it, or answers
// 401 and counts it.
func (a *Access) Authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		is := func(tok string) bool {
			return tok != "" && subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1
		}
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		ok := is(a.Admin) || read && (a.Read == "" || is(a.Read) || a.public(r.URL.Path))
		if !ok {
			Refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="msr"`)
			w.WriteHeader(http.StatusUnauthorized)
			what := "this request changes the router: it needs the admin token"
			if read {
				what = "reading needs the read or admin token"
			}
			fmt.Fprintf(w, "{\"error\":%q}\n", what+" (msr ctl --token-file)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServerTLS is the API's TLS configuration, or nil without a certificate.
func (s *Security) ServerTLS() (*tls.Config, error) {
	if s.Cert == "" {
		return nil, nil
	}
	c, err := tls.LoadX509KeyPair(s.Cert, s.Key)
	if err != nil {
		return nil, fmt.Errorf("api_security: %w (msr cert makes a deployment's)", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}, nil
}

// Trust is the file of what clients of the other elements' APIs trust:
// CA, or Cert in a deployment from before the CA.
func (s *Security) Trust() string {
	if s.CA != "" {
		return s.CA
	}
	return s.Cert
}

// ClientTLS trusts the deployment's CA (the file at cert), for clients of
// the other elements' APIs; nil without one.
func ClientTLS(cert string) (*tls.Config, error) {
	if cert == "" {
		return nil, nil
	}
	b, err := os.ReadFile(cert)
	if err != nil {
		return nil, fmt.Errorf("api certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("api certificate %s: no PEM certificate in it", cert)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Lifetimes of what MakeCredentials makes: the CA's, and an API
// certificate's, renewed by running it again after removing api.crt.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	certLifetime = 2 * 365 * 24 * time.Hour
)

// MakeCredentials writes a deployment's API credentials into dir: a CA
// (ca.crt, ca.key: ECDSA P-256, which signs certificates and nothing
// else), a certificate it signs for the management addresses hosts
// (api.crt, api.key: a server's, which cannot sign), and a read and an
// admin token (read.token, admin.token). Files already there are kept,
// but for a certificate the CA did not sign, which is made anew. ca.key
// belongs offline once the certificates are made.
func MakeCredentials(dir string, hosts []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"read.token", "admin.token"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		b := make([]byte, 24)
		rand.Read(b)
		if err := os.WriteFile(p, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
			return err
		}
	}
	caCrt, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	crt, key := filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	if _, err := os.Stat(caCrt); errors.Is(err, os.ErrNotExist) {
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "msr deployment CA"},
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
			BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true}
		if err := makeCert(caCrt, caKey, tmpl, caLifetime, nil, nil); err != nil {
			return err
		}
	}
	ca, err := tls.LoadX509KeyPair(caCrt, caKey)
	if err != nil {
		return fmt.Errorf("the deployment's CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return err
	}
	// A certificate there is kept if the CA signed it; one from before
	// the CA (self-signed) is made anew.
	if old, err := tls.LoadX509KeyPair(crt, key); err == nil {
		if leaf, err := x509.ParseCertificate(old.Certificate[0]); err == nil && leaf.CheckSignatureFrom(caCert) == nil {
			return nil
		}
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "msr management API"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return makeCert(crt, key, tmpl, certLifetime, caCert, ca.PrivateKey)
}

// makeCert gives tmpl a new key, a serial and its lifetime, has it signed
// by parent with parentKey (itself when parent is nil), and writes the
// certificate (0644) and its key (0600).
func makeCert(crtPath, keyPath string, tmpl *x509.Certificate, life time.Duration, parent *x509.Certificate, parentKey any) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber, _ = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(life)
	if parent == nil {
		parent, parentKey = tmpl, priv
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &priv.PublicKey, parentKey)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
