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
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// An upgrade in place: POST /upgrade?binary=PATH on an agent's API (a
// change: the admin token, or root on the local socket) has the agent
// check the binary, answer, stop as it does on SIGTERM (its data path
// stays pinned and forwarding), and exec the binary with its own
// arguments: the same process, namespaces and supervisor, running the new
// build, which adopts the pinned data path and migrates the maps of an
// older layout (internal/xdp.Load). GET /upgrade says what runs and since
// when. `msr ctl upgrade` rolls it over the router's elements.

// upgrader is an agent's upgrade: the binary it execs once Run returns
// (with --force added if the upgrade was forced over a downgrade).
type upgrader struct {
	kind    string // lb, router, vcp
	stop    context.CancelFunc
	started time.Time
	mu      sync.Mutex
	binary  string
	force   bool
}

func (u *upgrader) register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+api.PathUpgrade, func(w http.ResponseWriter, r *http.Request) {
		self, _ := os.Executable()
		api.Reply(w, api.UpgradeStatus{Running: versionText(), Started: u.started, Binary: self}, nil)
	})
	mux.HandleFunc("POST "+api.PathUpgrade, func(w http.ResponseWriter, r *http.Request) {
		bin, force := r.URL.Query().Get("binary"), r.URL.Query().Get("force") == "1"
		to, out, err := checkBinaryLayouts(bin)
		if err != nil {
			api.Reply(w, nil, err)
			return
		}
		// A build of an earlier map layout would refuse this one's pinned
		// data path at start, leaving the element down: refused here,
		// unless forced (then it starts with --force).
		cur, next := currentLayout(u.kind), layoutOf(out, u.kind)
		downgrade := cur > 0 && next < cur
		if downgrade && !force {
			api.Reply(w, nil, fmt.Errorf("upgrade: %s is a downgrade of the %s's map layout (%d, this build's %d): what this build keeps would be lost; force=1 (msr ctl upgrade --force) execs it with --force", bin, u.kind, next, cur))
			return
		}
		u.mu.Lock()
		if u.binary != "" {
			u.mu.Unlock()
			api.Reply(w, nil, errors.New("an upgrade is under way already"))
			return
		}
		u.binary, u.force = bin, downgrade
		u.mu.Unlock()
		self, _ := os.Executable()
		api.Reply(w, api.UpgradeStatus{Running: versionText(), Started: u.started, Binary: self, To: to}, nil)
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
	if u.force {
		argv = append(argv, "--force")
	}
	return fmt.Errorf("upgrade: exec %s: %w", bin, syscall.Exec(bin, argv, os.Environ()))
}

// layoutsText is `msr version`'s second line: the map layouts of the
// elements' pinned data paths in this build, which an upgrade compares.
func layoutsText() string {
	return fmt.Sprintf("map layouts: lb %d, router %d", lb.LayoutVersion, router.MapLayout())
}

// currentLayout is this build's map layout of an agent's kind, 0 for one
// without a data path (the VCP).
func currentLayout(kind string) uint32 {
	switch kind {
	case "lb":
		return lb.LayoutVersion
	case "router":
		return router.MapLayout()
	}
	return 0
}

// layoutOf reads a kind's map layout from `msr version`'s output, 0 if it
// says none (a build before layouts were numbered).
func layoutOf(out, kind string) uint32 {
	_, rest, ok := strings.Cut(out, "map layouts: ")
	if !ok {
		return 0
	}
	rest, _, _ = strings.Cut(rest, "\n")
	for _, f := range strings.Split(rest, ", ") {
		var k string
		var v uint32
		if n, _ := fmt.Sscanf(f, "%s %d", &k, &v); n == 2 && k == kind {
			return v
		}
	}
	return 0
}

// checkBinary refuses what an agent, running as root, must not exec on
// the word of an API call: a relative path, anything but a regular file,
// a file or a directory others than its owner may write, an owner other
// than root or the agent's own user, a program that does not say it is
// msr. It returns the binary's version line.
func checkBinary(bin string) (string, error) {
	line, _, err := checkBinaryLayouts(bin)
	return line, err
}

// checkBinaryLayouts is checkBinary, and the whole of what the binary's
// `version` said (its map layouts).
func checkBinaryLayouts(bin string) (string, string, error) {
	if !filepath.IsAbs(bin) {
		return "", "", fmt.Errorf("upgrade: binary %q: an absolute path", bin)
	}
	for _, p := range []string{bin, filepath.Dir(bin)} {
		fi, err := os.Stat(p)
		if err != nil {
			return "", "", fmt.Errorf("upgrade: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case p == bin && !fi.Mode().IsRegular():
			return "", "", fmt.Errorf("upgrade: %s is not a regular file", p)
		case fi.Mode().Perm()&0o022 != 0:
			return "", "", fmt.Errorf("upgrade: %s is writable by others than its owner (mode %v)", p, fi.Mode().Perm())
		case !ok || st.Uid != 0 && int(st.Uid) != os.Geteuid():
			return "", "", fmt.Errorf("upgrade: %s is owned by neither root nor this agent's user", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil || !strings.HasPrefix(line, "msr ") {
		return "", "", fmt.Errorf("upgrade: %s version: %v %q: not an msr binary", bin, err, line)
	}
	return line, string(out), nil
}

// decodeUpgrade reads an /upgrade answer.
func decodeUpgrade(b []byte) (*api.UpgradeStatus, error) {
	var s api.UpgradeStatus
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
	if len(k.vcps) == 0 {
		fmt.Printf("upgraded %d back-ends and %d LBs in %.1f s; now the VCPs: the standby, then the active (--vcps)\n",
			len(backends), len(lbs), time.Since(start).Seconds())
		return nil
	}
	if err := k.upgradeVCPs(); err != nil {
		return err
	}
	fmt.Printf("upgraded %d back-ends, %d LBs and %d VCPs in %.1f s\n", len(backends), len(lbs), len(k.vcps), time.Since(start).Seconds())
	return nil
}

// upgradeVCPs upgrades the VCPs named by --vcps through their local
// sockets: the standbys first, then the active one, whose stop hands the
// router to an upgraded standby (a takeover, 0.3-0.4 s) before it comes
// back as a standby itself.
func (k *console) upgradeVCPs() error {
	var standbys, active []string
	for _, name := range k.vcps {
		s, err := vcpapi.Local(name, "").Status()
		if err != nil {
			return fmt.Errorf("VCP %s: %w", name, err)
		}
		if s.Role == "active" {
			active = append(active, name)
		} else {
			standbys = append(standbys, name)
		}
	}
	if len(active) > 0 && len(standbys) == 0 {
		return fmt.Errorf("VCPs %v: no standby to take the router while the active one restarts: upgrade it by hand", k.vcps)
	}
	for _, name := range append(standbys, active...) {
		c := vcpapi.Local(name, "")
		ready := func() bool {
			s, err := c.Status()
			return err == nil && (s.Role == "active" || s.Role == "standby")
		}
		if err := k.upgradeOne(name, c.Raw, ready, false); err != nil {
			return err
		}
	}
	return nil
}

// upgradeElement upgrades one element in place through the VCP's relay,
// drained around it if a back-end.
func (k *console) upgradeElement(name string, backend bool) error {
	call := func(method, path string, body []byte) (int, []byte, error) {
		return k.c.Relay(name, method, path, body)
	}
	return k.upgradeOne(name, call, func() bool { return k.ready(name, backend) }, backend)
}

// upgradeOne upgrades one agent in place through call (its API), drained
// around it if a back-end, and waits for it to run the new build and be
// ready.
func (k *console) upgradeOne(name string, call func(method, path string, body []byte) (int, []byte, error), ready func() bool, backend bool) error {
	start := time.Now()
	if backend {
		if err := k.c.Drain(name, true); err != nil {
			return fmt.Errorf("%s: drain: %w", name, err)
		}
		time.Sleep(k.drainWait)
	}
	q := url.Values{"binary": {k.binary}}
	if k.force {
		q.Set("force", "1")
	}
	status, answer, err := call("POST", api.PathUpgrade+"?"+q.Encode(), nil)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("%s: upgrade refused: %v %s (it runs the old build%s)", name, err, answer, drainedNote(backend))
	}
	asked, err := decodeUpgrade(answer)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var now *api.UpgradeStatus
	for deadline := time.Now().Add(upgradeWait); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not back on %s within %v (last: %+v)%s", name, asked.To, upgradeWait, now, drainedNote(backend))
		}
		status, answer, err := call("GET", api.PathUpgrade, nil)
		if err != nil || status != http.StatusOK {
			continue
		}
		if now, err = decodeUpgrade(answer); err == nil && now.Running == asked.To && now.Started.After(asked.Started) && ready() {
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
