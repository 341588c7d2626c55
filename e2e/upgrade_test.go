package e2e

import (
	"bytes"
	crand "crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/soak"
	"github.com/msr-router/msr/traffic"
)

// TestRollingUpgrade: `msr ctl upgrade` rolls a build of the next map
// layout (-tags msr_next_layout: the back-ends' neighbour entries 8
// bytes longer) over the default lab under load: UDP from the
// instrument's generator on h1 to its sink on h3, 16 paced TCP streams
// (iperf3) and HTTP downloads (curl from nginx, each one's sha256
// checked) from h1 to h3. Every back-end is drained, upgraded in place
// and undrained, every LB upgraded in place, then the standby VCP and
// the active one, whose stop hands the router to the other. Then, under
// the same load, a commit-confirmed reload (an ACL rule more, pushed to
// every back-end) is not confirmed and rolls back by itself. Through
// both no UDP frame is lost, no TCP stream is reset or stalls, every
// download's sha256 is the one served, and each back-end migrated its
// neighbours into the new layout rather than starting them empty.
//
// The UDP rate for those is the soak's (soak.DefaultRate), or half the
// router's PDR if that is less: this machine's hypervisor stalls a CPU
// for up to 11.5 ms, and at half the PDR a veth ring of 256 frames holds
// less than that, so the machine loses frames with nothing done
// (docs/operations.md).
func TestRollingUpgrade(t *testing.T) {
	built := startNextLayout(t)
	r, err := bench.OpenRouterLab(msrBin, 64, demo.Options{Prefixes: 300})
	next := built()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	pdr, err := r.PDR(traffic.MinFrameSize, msrtest.Log{T: t})
	if err != nil {
		t.Fatal(err)
	}
	safe := min(soak.DefaultRate, pdr/2)
	t.Logf("the router's PDR: %.0f pps of %d-byte frames; the UDP load: %.0f pps", pdr, traffic.MinFrameSize, safe)
	www := startWWW(t)
	upgradeTo := func(bin, want string) func() error {
		return func() error {
			out, errOut, code := msr(t, "ctl", "--name", "vcp1", "upgrade", "--binary", bin, "--drain-wait", "1s", "--vcps", "vcp1,vcp2")
			t.Logf("msr ctl upgrade:\n%s%s", out, errOut)
			if code != 0 {
				return fmt.Errorf("msr ctl upgrade: exit %d", code)
			}
			for _, e := range []string{"r1", "r2", "r3", "lb1", "lb2", "vcp1", "vcp2"} {
				if !regexp.MustCompile(`(?m)^` + e + ` .*-> ` + want + ` `).MatchString(out) {
					return fmt.Errorf("the upgrade did not report %s on the new build", e)
				}
			}
			return nil
		}
	}

	control := underLoad(t, r, www, safe, "nothing", func() error { time.Sleep(10 * time.Second); return nil })
	upgrade := underLoad(t, r, www, safe, "msr ctl upgrade", upgradeTo(next, "next-layout"))
	active := demo.Look().VCP
	if active != "vcp2" {
		t.Errorf("the active VCP after the upgrade: %q, want vcp2 (vcp1 upgraded last, handing it over)", active)
	}
	reload := underLoad(t, r, www, safe, "reload --confirm, rolled back", func() error { return reloadRolledBack(t, active) })
	for _, l := range []loadResult{control, upgrade, reload} {
		if l.lost != 0 {
			t.Errorf("%s lost %d of %d UDP frames at %.0f pps", l.what, l.lost, l.sent, safe)
		}
	}
	for _, b := range []string{"r1", "r2", "r3"} {
		log, _ := os.ReadFile(filepath.Join("/run/msr/labs/default/logs", b+".router.log"))
		if !strings.Contains(string(log), `msg="data path map of an older layout migrated" component=router router=`+b+` map=rt_neighbors`) ||
			strings.Contains(string(log), "empty=true") {
			t.Errorf("%s did not migrate its neighbours:\n%s", b, lastLines(string(log), 20))
		}
	}
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	if n := strings.Count(string(ps), next+" "); n != 7 {
		t.Errorf("%d agents run the new build, want 7 (3 back-ends, 2 LBs, 2 VCPs):\n%s", n, ps)
	}

	for _, l := range []loadResult{control, upgrade, reload} {
		t.Logf("%-34s %4.1f s  UDP %8d sent %5d lost (%.4f%%)  steal %3d ticks  TCP lowest second %.1f Mbit/s  %d downloads", l.what, l.took.Seconds(),
			l.sent, l.lost, 100*float64(l.lost)/float64(max(l.sent, 1)), l.steal, l.lowest/1e6, l.downloads)
	}
}

// tcpSeconds is the length of the TCP transfer under each action, longer
// than any action takes; tcpRate each stream's pace, at the socket
// (SO_MAX_PACING_RATE): TCP's segments offloaded in bursts of up to 45
// frames would otherwise share the veth rings with the UDP frames, and
// 16 such streams at 4 Mbit/s lost 61 of 200,241 UDP frames in 20 s
// with nothing done (see docs/operations.md).
const (
	tcpSeconds = 20
	tcpRate    = "1M"
)

// startNextLayout starts building msr with the next map layout, its
// version "next-layout", and returns what waits for the build and gives
// the binary's path (the lab comes up meanwhile).
func startNextLayout(t *testing.T) func() string {
	t.Helper()
	next := filepath.Join(t.TempDir(), "msr")
	build := exec.Command("go", "build", "-tags", "msr_next_layout", "-ldflags", "-X main.version=next-layout", "-o", next, "./cmd/msr")
	build.Dir = ".."
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	return func() string {
		t.Helper()
		if err := build.Wait(); err != nil {
			t.Fatalf("build the next layout: %v\n%s", err, out.String())
		}
		return next
	}
}

// wwwBlob is the size of the file nginx on h3 serves, and curl's pace:
// a download takes 4 s.
const (
	wwwBlob  = 4 << 20
	wwwLimit = "1M"
)

// www is nginx on h3 serving a blob of random bytes, and its sha256.
type www struct {
	dir string
	sum [sha256.Size]byte
}

// startWWW starts nginx on h3, stopped when the test ends.
func startWWW(t *testing.T) *www {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // nginx's workers run as www-data
	blob := make([]byte, wwwBlob)
	crand.Read(blob)
	os.WriteFile(filepath.Join(dir, "blob"), blob, 0o644)
	conf := filepath.Join(dir, "nginx.conf")
	os.WriteFile(conf, []byte(`daemon on;
pid `+dir+`/nginx.pid;
error_log `+dir+`/error.log;
events {}
http {
	access_log off;
	server { listen `+demo.H3+`:80; root `+dir+`; }
}
`), 0o644)
	if out, err := demo.Exec("h3", "nginx", "-c", conf); err != nil {
		t.Fatalf("nginx on h3: %v\n%s", err, out)
	}
	t.Cleanup(func() { demo.Exec("h3", "nginx", "-c", conf, "-s", "stop") })
	return &www{dir: dir, sum: sha256.Sum256(blob)}
}

// loadResult is what a window of load saw: UDP frames sent and lost,
// the TCP streams' bits a second each second (their sum), the downloads
// done and those whose sha256 differed, and what the action said.
type loadResult struct {
	what       string
	took       time.Duration
	sent, lost uint64
	intervals  []float64
	lowest     float64
	downloads  int
	steal      uint64 // the CPUs' steal meanwhile, in ticks
}

// underLoad does action while the generator sends UDP at rate, 16
// streams of tcpRate carry TCP and curl downloads from nginx, all from
// h1 to h3, until the action and a whole TCP transfer of at least its
// length are over. The TCP streams must end clean, none of their seconds
// without traffic, and every download must be whole; the action's error
// fails the test.
func underLoad(t *testing.T, r *bench.RouterLab, w *www, rate float64, what string, action func() error) loadResult {
	t.Helper()
	res := loadResult{what: what, lowest: -1}
	iperf3Server(t)
	var wg sync.WaitGroup
	var tcpErr, actErr error
	actDone, tcpDone := make(chan struct{}), make(chan struct{})
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the downloads
		defer wg.Done()
		got := filepath.Join(w.dir, "got-"+strings.ReplaceAll(what, " ", "-"))
		for {
			select {
			case <-stop:
				return
			default:
			}
			out, err := demo.Exec("h1", "curl", "-sS", "--fail", "--limit-rate", wwwLimit, "-o", got, "http://"+demo.H3+"/blob")
			data, _ := os.ReadFile(got)
			os.Remove(got)
			if err != nil || sha256.Sum256(data) != w.sum {
				t.Errorf("%s: a download: %v %s: %d bytes, sha256 equal: %v", what, err, out, len(data), bytes.Equal(sha(data), w.sum[:]))
				return
			}
			res.downloads++
		}
	}()
	start, steal := time.Now(), stealTicks()
	var actEnd, tcpEnd time.Time
	trial, err := r.Send(traffic.MinFrameSize, rate, func(g *traffic.Generator) (uint64, error) {
		go func() {
			defer close(actDone)
			actErr = action()
			actEnd = time.Now()
		}()
		go func() {
			defer func() { tcpEnd = time.Now(); close(tcpDone) }()
			// Long enough for the action; the downloads too; the
			// generator sends until both are over.
			res.intervals, _, tcpErr = iperf3(t, "h1", tcpSeconds*time.Second, 16, "-b", tcpRate, "--fq-rate", tcpRate)
		}()
		var sent uint64
		for _, ch := range []chan struct{}{actDone, tcpDone} {
			for done := false; !done; {
				n, err := g.Blast(250 * time.Millisecond)
				sent += n
				if err != nil {
					return sent, err
				}
				select {
				case <-ch:
					done = true
				default:
				}
			}
		}
		return sent, nil
	})
	res.took, res.steal = time.Since(start), stealTicks()-steal
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("%s: the generator: %v", what, err)
	}
	res.sent, res.lost = trial.Sent, trial.Lost()
	if actErr != nil {
		t.Errorf("%s: %v", what, actErr)
	}
	if actEnd.After(tcpEnd) {
		t.Errorf("%s outlasted the TCP streams (%d s): make them longer", what, tcpSeconds)
	}
	if tcpErr != nil {
		t.Errorf("%s: iperf3's 16 streams: %v", what, tcpErr)
	}
	for i, bps := range res.intervals {
		if res.lowest < 0 || bps < res.lowest {
			res.lowest = bps
		}
		if bps < 1e6 {
			t.Errorf("%s: second %d of the TCP streams: %.0f bit/s: forwarding stopped", what, i, bps)
		}
	}
	if res.downloads == 0 {
		t.Errorf("%s: no download finished", what)
	}
	return res
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// stealTicks is the CPUs' steal time so far, in ticks (/proc/stat).
func stealTicks() uint64 {
	b, _ := os.ReadFile("/proc/stat")
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	if len(f) < 9 {
		return 0
	}
	n, _ := strconv.ParseUint(f[8], 10, 64)
	return n
}

// reloadRolledBack reloads the active VCP's config with an ACL rule more
// (every back-end's data path takes it), confirm within 10 s, does not
// confirm it, and waits until the VCP has rolled it back: its file the
// one before, the history saying so.
func reloadRolledBack(t *testing.T, vcp string) error {
	file := filepath.Join(demo.RunDir, vcp+".yaml")
	base, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	const rule = "  - {action: deny, proto: tcp, dst: 192.0.2.0/24, dport: 24}\n"
	changed := strings.Replace(string(base), "acl:\n", "acl:\n"+rule, 1)
	if changed == string(base) {
		return fmt.Errorf("%s has no acl section", file)
	}
	os.WriteFile(file, []byte(changed), 0o644)
	start := time.Now()
	if out, errOut, code := msr(t, "ctl", "--name", vcp, "reload", "--confirm", "10s"); code != 0 {
		return fmt.Errorf("reload --confirm 10s: exit %d: %s%s", code, out, errOut)
	}
	for deadline := start.Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, _, _ := msr(t, "ctl", "--name", vcp, "history")
		now, _ := os.ReadFile(file)
		if bytes.Equal(now, base) && strings.Contains(out, "not confirmed within") {
			if d := time.Since(start); d < 10*time.Second {
				return fmt.Errorf("rolled back %v after the reload, before its 10 s", d)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not rolled back 30 s after a reload to confirm within 10 s:\n%s", out)
		}
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
