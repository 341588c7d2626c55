package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/lb/lbapi"
)

// An upgrade in place: POST /upgrade?binary=PATH on an agent's API (a
// change: the admin token, or root on the local socket) has the agent
// check the binary, answer, stop as it does on SIGTERM (its data path
// stays pinned and forwarding), and exec the binary with its own
// arguments: the same process, namespaces and supervisor, running the new
// build, which adopts the pinned data path and migrates the maps of an
// older layout (internal/xdp.Load). GET /upgrade says what runs and since
// when. `msr ctl upgrade` rolls it over the router's elements.

// pathUpgrade is the upgrade's path on every agent's API.
const pathUpgrade = "/upgrade"

// upgradeStatus is what GET /upgrade answers, and POST's answer.
type upgradeStatus struct {
	Running string    `json:"running"` // msr version's line
	Started time.Time `json:"started"`
	Binary  string    `json:"binary"`
	// To is the build the agent is about to exec (POST's answer).
	To string `json:"to,omitempty"`
}

// upgrader is an agent's upgrade: the binary it execs once Run returns.
type upgrader struct {
	stop    context.CancelFunc
	started time.Time
	mu      sync.Mutex
	binary  string
}

func (u *upgrader) register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+pathUpgrade, func(w http.ResponseWriter, r *http.Request) {
		self, _ := os.Executable()
		api.Reply(w, upgradeStatus{Running: versionText(), Started: u.started, Binary: self}, nil)
	})
	mux.HandleFunc("POST "+pathUpgrade, func(w http.ResponseWriter, r *http.Request) {
		bin := r.URL.Query().Get("binary")
		to, err := checkBinary(bin)
		if err != nil {
			api.Reply(w, nil, err)
			return
		}
		u.mu.Lock()
		if u.binary != "" {
			u.mu.Unlock()
			api.Reply(w, nil, errors.New("an upgrade is under way already"))
			return
		}
		u.binary = bin
		u.mu.Unlock()
		self, _ := os.Executable()
		api.Reply(w, upgradeStatus{Running: versionText(), Started: u.started, Binary: self, To: to}, nil)
		http.NewResponseController(w).Flush()
		// The answer out first, then the stop.
		time.AfterFunc(100*time.Millisecond, u.stop)
	})
}

// pending is the binary to exec, "" for none.
func (u *upgrader) pending() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.binary
}

// exec replaces the process with the new binary, its arguments and
// environment the same. It returns only if exec fails.
func (u *upgrader) exec(bin string) error {
	argv := append([]string{bin}, os.Args[1:]...)
	return fmt.Errorf("upgrade: exec %s: %w", bin, syscall.Exec(bin, argv, os.Environ()))
}

// checkBinary refuses what an agent, running as root, must not exec on
// the word of an API call: a relative path, anything but a regular file,
// a file or a directory others than its owner may write, an owner other
// than root or the agent's own user, a program that does not say it is
// msr. It returns the binary's version line.
func checkBinary(bin string) (string, error) {
	if !filepath.IsAbs(bin) {
		return "", fmt.Errorf("upgrade: binary %q: an absolute path", bin)
	}
	for _, p := range []string{bin, filepath.Dir(bin)} {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("upgrade: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case p == bin && !fi.Mode().IsRegular():
			return "", fmt.Errorf("upgrade: %s is not a regular file", p)
		case fi.Mode().Perm()&0o022 != 0:
			return "", fmt.Errorf("upgrade: %s is writable by others than its owner (mode %v)", p, fi.Mode().Perm())
		case !ok || st.Uid != 0 && int(st.Uid) != os.Geteuid():
			return "", fmt.Errorf("upgrade: %s is owned by neither root nor this agent's user", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	line := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(line, "msr ") {
		return "", fmt.Errorf("upgrade: %s version: %v %q: not an msr binary", bin, err, line)
	}
	return line, nil
}

// decodeUpgrade reads an /upgrade answer.
func decodeUpgrade(b []byte) (*upgradeStatus, error) {
	var s upgradeStatus
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("upgrade answer %q: %w", b, err)
	}
	return &s, nil
}

// upgradeWait bounds each element's return after its upgrade.
const upgradeWait = 90 * time.Second

// rollUpgrade is `msr ctl upgrade --binary PATH`: the binary (already on
// every element's host at that path) rolled over the router through the
// VCP, one element at a time. Each back-end is drained (no new flows),
// upgraded in place, and undrained once it runs the new build and its FIB
// holds the RIB again; then each LB (it cannot be drained: it owns its
// ports) is upgraded in place, its data path forwarding throughout. It
// stops at the first element that does not come back, saying why. The
// VCPs are upgraded last, by hand: the standby, then the active
// (docs/operations.md).
func (k *console) rollUpgrade(_ []string) error {
	if k.binary == "" {
		return fmt.Errorf("upgrade needs --binary PATH: the new build, on every element's host at that path")
	}
	es, err := k.c.Elements()
	if err != nil {
		return err
	}
	var backends, lbs []string
	for _, e := range es {
		switch {
		case !e.Alive:
			return fmt.Errorf("%s is not alive: a rolling upgrade starts with every element up", e.Name)
		case e.Role == "router":
			backends = append(backends, e.Name)
		case e.Role == "lb":
			lbs = append(lbs, e.Name)
		}
	}
	start := time.Now()
	for _, b := range backends {
		if err := k.upgradeElement(b, true); err != nil {
			return err
		}
	}
	for _, l := range lbs {
		if err := k.upgradeElement(l, false); err != nil {
			return err
		}
	}
	fmt.Printf("upgraded %d back-ends and %d LBs in %.1f s; now the VCPs: the standby, then the active\n",
		len(backends), len(lbs), time.Since(start).Seconds())
	return nil
}

// upgradeElement upgrades one element in place, drained around it if a
// back-end, and waits for it to run the new build and be ready.
func (k *console) upgradeElement(name string, backend bool) error {
	start := time.Now()
	if backend {
		if err := k.c.Drain(name, true); err != nil {
			return fmt.Errorf("%s: drain: %w", name, err)
		}
		time.Sleep(k.drainWait)
	}
	status, answer, err := k.c.Relay(name, "POST", pathUpgrade+"?binary="+url.QueryEscape(k.binary), nil)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("%s: upgrade refused: %v %s (it runs the old build%s)", name, err, answer, drainedNote(backend))
	}
	asked, err := decodeUpgrade(answer)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var now *upgradeStatus
	for deadline := time.Now().Add(upgradeWait); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not back on %s within %v (last: %+v)%s", name, asked.To, upgradeWait, now, drainedNote(backend))
		}
		status, answer, err := k.c.Relay(name, "GET", pathUpgrade, nil)
		if err != nil || status != http.StatusOK {
			continue
		}
		if now, err = decodeUpgrade(answer); err == nil && now.Running == asked.To && now.Started.After(asked.Started) && k.ready(name, backend) {
			break
		}
	}
	if backend {
		if err := k.c.Drain(name, false); err != nil {
			return fmt.Errorf("%s: undrain: %w", name, err)
		}
	}
	fmt.Printf("%-12s %s -> %s  %.1f s\n", name, shortVersion(asked.Running), shortVersion(asked.To), time.Since(start).Seconds())
	return nil
}

// ready says whether an upgraded element is back at work: a back-end
// whose FIB holds the RIB (its status's ready), an LB with a table.
func (k *console) ready(name string, backend bool) bool {
	status, answer, err := k.c.Relay(name, "GET", lbapi.PathStatus, nil)
	if err != nil || status != http.StatusOK {
		return false
	}
	var s struct {
		Ready bool `json:"ready"`
		Table struct {
			Slots int `json:"slots"`
		} `json:"table"`
	}
	if json.Unmarshal(answer, &s) != nil {
		return false
	}
	if backend {
		return s.Ready
	}
	return s.Table.Slots > 0
}

func drainedNote(backend bool) string {
	if backend {
		return "; left drained: msr ctl undrain once it is back"
	}
	return ""
}

// shortVersion is a version line's version and commit.
func shortVersion(line string) string {
	f := strings.Fields(line)
	if len(f) >= 4 {
		return f[1] + " " + f[3][:min(len(f[3]), 12)]
	}
	return line
}
