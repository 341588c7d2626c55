package logging

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRepeatsHeldBack: fifty identical errors in a burst are one line;
// the next after the window says how many were held back; another
// message, an info line, or the same message from another component are
// not held back.
func TestRepeatsHeldBack(t *testing.T) {
	var b bytes.Buffer
	log, _ := New(&b, Config{Format: "json", Level: "info"}, 200*time.Millisecond)
	lb := log.With("component", "lb")
	for range 50 {
		lb.Error("send hello", "err", "no buffer space")
	}
	lb.Error("send hello", "err", "network is down")
	log.With("component", "vcp").Error("send hello", "err", "no buffer space")
	lb.Info("table installed")
	lb.Info("table installed")
	lb.Debug("not at this level")
	time.Sleep(250 * time.Millisecond)
	lb.Error("send hello", "err", "no buffer space")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		lines = append(lines, m)
	}
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), b.String())
	}
	if last := lines[5]; last["repeated"] != float64(49) || last["err"] != "no buffer space" {
		t.Errorf("the line after the window: %v, want repeated 49", last)
	}
	if _, ok := lines[0]["repeated"]; ok {
		t.Errorf("the first line says repeated: %v", lines[0])
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []Config{{Level: "verbose"}, {Format: "xml"}} {
		if c.Check() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Config{Level: "debug", Format: "json"}).Check(); err != nil {
		t.Error(err)
	}
}

// The level changes at run time through LevelHandler: debug lines appear
// after PUT ?level=debug and not before; a bad level is refused and
// changes nothing.
func TestLevelAtRunTime(t *testing.T) {
	var b bytes.Buffer
	log, level := New(&b, Config{Level: "info"}, time.Second)
	h := LevelHandler(level, log)
	do := func(method, target string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w.Code, w.Body.String()
	}
	log.Debug("before")
	if code, body := do("GET", PathLevel); code != 200 || !strings.Contains(body, `"level":"info"`) {
		t.Errorf("GET: %d %s", code, body)
	}
	for _, q := range []string{"?level=loud", ""} {
		if code, body := do("PUT", PathLevel+q); code != 400 || !strings.Contains(body, "debug") {
			t.Errorf("PUT %q: %d %s, want 400 naming the levels", q, code, body)
		}
	}
	if code, body := do("PUT", PathLevel+"?level=debug"); code != 200 || !strings.Contains(body, `"level":"debug"`) {
		t.Errorf("PUT debug: %d %s", code, body)
	}
	log.Debug("after")
	out := b.String()
	if strings.Contains(out, "before") || !strings.Contains(out, "msg=after") || !strings.Contains(out, "log level changed") {
		t.Errorf("the log:\n%s\nwant no debug line before the change, the change, and the debug line after", out)
	}
}
