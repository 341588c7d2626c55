package e2e

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
)

// TestWebView: a real browser (Debian's Chromium, headless) on the lab's
// management network opens the VCP's web view (https, the lab's
// certificate pinned; the view public, no token) while h1 sends 32 UDP flows
// through the router; the page, built by its script from GET /view,
// shows r1, r2 and r3 each with a share of the traffic above zero, the
// LBs and the VCPs; its screenshot is a real picture. With
// MSR_UPDATE_SCREENSHOT=1 the screenshot replaces docs/webview.png.
func TestWebView(t *testing.T) {
	upDefaultLab(t, 100)
	iperf3Server(t)
	done := make(chan error, 1)
	go func() {
		_, err := demo.Exec("h1", "iperf3", "-c", demo.H3, "-u", "-b", "2M", "-P", "32", "-t", "15")
		done <- err
	}()
	time.Sleep(3 * time.Second) // the VCP's rates: a window of hellos
	url := "https://" + demo.VCPAPI + "/"
	// The browser trusts the lab's certificate, and only it: its public
	// key pinned (the server's own: the one it presents).
	pem, err := os.ReadFile(demo.APIFile("api.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pemDecode(pem)
	cert, err := x509.ParseCertificate(block)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	profile := t.TempDir()
	chromium := func(args ...string) string {
		t.Helper()
		argv := append([]string{"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir=" + profile, "--virtual-time-budget=3000",
			"--ignore-certificate-errors-spki-list=" + base64.StdEncoding.EncodeToString(spki[:])}, args...)
		out, err := demo.Exec("mon", append(argv, url)...)
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, out)
		}
		return out
	}
	dom := chromium("--dump-dom")
	row := regexp.MustCompile(`<tr class="backend" data-name="(r\d)" data-share="([0-9.]+)">`)
	shares := map[string]float64{}
	for _, m := range row.FindAllStringSubmatch(dom, -1) {
		shares[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	for _, r := range demo.Backends {
		if shares[r] <= 0 {
			t.Errorf("the page shows %s with share %v: %v", r, shares[r], shares)
		}
	}
	for _, want := range []string{`data-name="lb1" data-role="lb"`, `data-name="lb2" data-role="lb"`, `data-name="vcp1" data-role="vcp"`, `class="port" data-name="lb1/e0"`} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(dom) {
			t.Errorf("the page lacks %s", want)
		}
	}
	t.Logf("shares on the page: %v", shares)

	shot := filepath.Join(t.TempDir(), "webview.png")
	if os.Getenv("MSR_UPDATE_SCREENSHOT") == "1" {
		shot, _ = filepath.Abs("../docs/webview.png")
	}
	chromium("--screenshot="+shot, "--window-size=1280,1100", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1100 {
		t.Errorf("screenshot %v", b)
	}
	if err := <-done; err != nil {
		t.Logf("iperf3: %v", err)
	}
}

// pemDecode is the DER bytes of the first PEM block.
func pemDecode(b []byte) ([]byte, []byte) {
	p, rest := pem.Decode(b)
	if p == nil {
		return nil, rest
	}
	return p.Bytes, rest
}
