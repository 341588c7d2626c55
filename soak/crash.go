package soak

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
)

// The crashes: a process of the router killed with SIGKILL. The goal of
// each is nothing lost: an agent's data path forwards from its pinned
// programs and maps while a supervisor starts it again, and the standby
// takes over a VCP's address and suite.

// agentCrash is lb-agent or backend-agent: host's agent name killed and
// started again. A back-end's agent has a new RIB feed (feed).
type agentCrash struct {
	quiet
	what, host, name string
	feed             bool
}

func (c *agentCrash) kind() string                  { return c.what }
func (c *agentCrash) target() string                { return c.host }
func (c *agentCrash) inject(*bench.RouterLab) error { return bench.Crash(c.host, c.name) }
func (c *agentCrash) restarts() restart {
	if c.feed {
		return restartsFeed
	}
	return restartsNothing
}

// vcpCrash is vcp: the active VCP's agent killed and started again.
type vcpCrash struct{ quiet }

func (vcpCrash) kind() string                  { return "vcp" }
func (vcpCrash) target() string                { return "the active VCP" }
func (vcpCrash) inject(*bench.RouterLab) error { return bench.CrashActiveVCP() }
func (vcpCrash) restarts() restart             { return restartsSuite }

// activeKill is suite or keepalived: every process name of the active
// VCP (its command line naming the VCP's conf) killed; the VCP starts
// it again, or the standby takes over.
type activeKill struct {
	quiet
	what, name, conf, daemon string
}

func (k *activeKill) kind() string      { return k.what }
func (k *activeKill) target() string    { return k.daemon + " on the active VCP" }
func (k *activeKill) restarts() restart { return restartsSuite }

func (k *activeKill) inject(*bench.RouterLab) error {
	active, err := bench.ActiveVCP()
	if err != nil {
		return err
	}
	path := filepath.Join(demo.RunDir, active, k.conf)
	out, err := exec.Command("pgrep", "-f", k.name+" .*"+path).Output()
	if err != nil {
		return fmt.Errorf("no %s of %s running: %v", k.name, active, err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}
