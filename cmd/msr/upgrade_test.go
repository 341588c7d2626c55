package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/router"
)

// TestCheckBinary: an agent execs, on an API call, only an absolute path
// to a regular file that only its owner (root or the agent's user) may
// write, in a directory the same, that says it is msr.
func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "msr")
	os.WriteFile(good, []byte("#!/bin/sh\necho msr v9 commit abc go1.26\n"), 0o755)
	if v, err := checkBinary(good); err != nil || v != "msr v9 commit abc go1.26" {
		t.Errorf("a good binary: %q %v", v, err)
	}
	liar := filepath.Join(dir, "liar")
	os.WriteFile(liar, []byte("#!/bin/sh\necho not this\n"), 0o755)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("#!/bin/sh\necho msr v9\n"), 0o755)
	os.Chmod(open, 0o757)
	shared := t.TempDir()
	os.Chmod(shared, 0o777)
	inShared := filepath.Join(shared, "msr")
	os.WriteFile(inShared, []byte("#!/bin/sh\necho msr v9\n"), 0o755)
	for bin, want := range map[string]string{
		"msr":      "an absolute path",
		dir:        "not a regular file",
		liar:       "not an msr binary",
		open:       "writable by others",
		inShared:   "writable by others",
		"/nowhere": "no such file",
	} {
		if _, err := checkBinary(bin); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bin, err, want)
		}
	}
}

// TestUpgradeRefusesDowngrade: an agent refuses to exec a build of an
// earlier map layout of its kind (its data path would refuse this one's
// pins, the element left down), unless forced, and then execs it with
// --force; a build of the same layout is taken as it is.
func TestUpgradeRefusesDowngrade(t *testing.T) {
	dir := t.TempDir()
	script := func(name, layouts string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("#!/bin/sh\necho msr v9 commit abc go1.26\necho '"+layouts+"'\n"), 0o755)
		return p
	}
	older := script("older", fmt.Sprintf("map layouts: lb %d, router %d", lb.LayoutVersion, router.MapLayout()-1))
	same := script("same", layoutsText())
	post := func(u *upgrader, q string) *httptest.ResponseRecorder {
		mux := http.NewServeMux()
		u.register(mux)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("POST", api.PathUpgrade+"?"+q, nil))
		return w
	}
	u := &upgrader{kind: "router", stop: func() {}}
	if w := post(u, "binary="+older); w.Code == http.StatusOK || !strings.Contains(w.Body.String(), "downgrade") || u.pending() != "" {
		t.Errorf("a downgrade: %d %s", w.Code, w.Body)
	}
	if w := post(u, "binary="+older+"&force=1"); w.Code != http.StatusOK || u.pending() != older || !u.force {
		t.Errorf("a forced downgrade: %d %s, pending %q, force %v", w.Code, w.Body, u.pending(), u.force)
	}
	u = &upgrader{kind: "router", stop: func() {}}
	if w := post(u, "binary="+same); w.Code != http.StatusOK || u.pending() != same || u.force {
		t.Errorf("the same layout: %d %s, force %v", w.Code, w.Body, u.force)
	}
	// The VCP has no data path: any layout goes.
	u = &upgrader{kind: "vcp", stop: func() {}}
	if w := post(u, "binary="+older); w.Code != http.StatusOK {
		t.Errorf("the VCP to another layout: %d %s", w.Code, w.Body)
	}
	if layoutOf("msr v1\n", "router") != 0 || layoutOf("msr v1\nmap layouts: lb 3, router 7\n", "router") != 7 {
		t.Error("layoutOf")
	}
}
