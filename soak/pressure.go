package soak

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
)

// The soak's memory pressure (on a back-end, by a cgroup limit): a back-end's agent is put for pressureHold into a
// memory cgroup whose limit is what is charged to it then (the agent's
// memory, where the kernel moves charges; else nothing) and
// pressureMargin more, as on a host short of memory; then the limit is
// lifted. The
// kernel reclaims what it can and kills the agent if it must (OOM): the
// agent is then started again, as a supervisor would. Its data path (XDP
// programs and maps pinned in the kernel) forwards all along: the goal is
// nothing lost.

const (
	pressureHold   = 3 * time.Second
	pressureMargin = 4 << 20
	pressureCgroup = "msr-soak-pressure"
)

// pressure is a memory-pressure fault on a back-end: whether the kernel
// killed its agent for it.
type pressure struct {
	quiet
	backend string
	killed  bool
	limit   int64 // the cgroup's limit, bytes
}

func (p *pressure) inject(*bench.RouterLab) error {
	st, err := lab.ReadState(demo.LabName)
	if err != nil {
		return err
	}
	pid := 0
	for _, ps := range st.Processes {
		if ps.Host == p.backend && ps.Name == "router" && ps.Running() {
			pid = ps.PID
		}
	}
	if pid == 0 {
		return fmt.Errorf("%s's agent is not running", p.backend)
	}
	cg, err := newMemoryCgroup(pressureCgroup)
	if err != nil {
		return err
	}
	defer cg.remove()
	if err := cg.enter(pid); err != nil {
		return err
	}
	defer cg.leave(pid)
	usage, err := cg.usage()
	if err != nil {
		return err
	}
	p.limit = usage + pressureMargin
	if err := cg.limit(p.limit); err != nil {
		return err
	}
	time.Sleep(pressureHold)
	if syscall.Kill(pid, 0) != nil { // killed for want of memory
		p.killed = true
		_, _, err := lab.Restart(demo.LabName, p.backend, "router", syscall.SIGKILL)
		return err
	}
	return nil
}

// memoryCgroup is a memory cgroup of its own: cgroup v2's unified
// hierarchy where the machine has it, else v1's memory controller (these
// machines'). A process that enters brings its memory's charges only
// where the kernel moves them (v1's move_charge_at_immigrate, refused by
// this one): else the cgroup's usage, and so its limit, counts what the
// process allocates from then on.
type memoryCgroup struct {
	dir, parent string
	v2          bool
}

func newMemoryCgroup(name string) (*memoryCgroup, error) {
	c := &memoryCgroup{parent: "/sys/fs/cgroup/memory"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c.parent, c.v2 = "/sys/fs/cgroup", true
	}
	c.dir = filepath.Join(c.parent, name)
	os.Remove(c.dir) // a former run's, empty
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	if !c.v2 {
		// Where the kernel still moves charges (deprecated since 6.x:
		// EINVAL), the process's memory comes with it; else only what it
		// allocates from now on is charged, and the limit bounds that.
		c.write("memory.move_charge_at_immigrate", "3")
	}
	return c, nil
}

func (c *memoryCgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("memory cgroup: %w", err)
	}
	return nil
}

func (c *memoryCgroup) enter(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// leave moves pid back to the parent cgroup.
func (c *memoryCgroup) leave(pid int) error {
	err := os.WriteFile(filepath.Join(c.parent, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("memory cgroup: %w", err)
	}
	return nil
}

func (c *memoryCgroup) usage() (int64, error) {
	file := "memory.usage_in_bytes"
	if c.v2 {
		file = "memory.current"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, fmt.Errorf("memory cgroup: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func (c *memoryCgroup) limit(bytes int64) error {
	if c.v2 {
		return c.write("memory.max", strconv.FormatInt(bytes, 10))
	}
	return c.write("memory.limit_in_bytes", strconv.FormatInt(bytes, 10))
}

// remove removes the cgroup once empty (a process killed in it leaves
// it).
func (c *memoryCgroup) remove() {
	for range 50 {
		if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// report puts the fault's figures in its entry of the report.
func (p *pressure) report(into *FaultReport) {
	if p == nil {
		return
	}
	into.MemoryLimit, into.OOMKilled = p.limit, p.killed
}

func (p *pressure) kind() string   { return "backend-memory" }
func (p *pressure) target() string { return p.backend + "'s agent" }

// restarts is the agent's feed if the kernel killed it.
func (p *pressure) restarts() restart {
	if p.killed {
		return restartsFeed
	}
	return restartsNothing
}

func (p *pressure) text(row FaultReport) string {
	text := fmt.Sprintf(" (limit %.1f MB", float64(row.MemoryLimit)/1e6)
	if row.OOMKilled {
		text += ", killed for it and started again"
	}
	return text + ")"
}
