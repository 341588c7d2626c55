package lb

import (
	"maps"
	"slices"
)

// Rekey reads the agent's DIST key files again: its hellos and probes are
// sealed with the first element key, and every key the files hold is
// accepted (a key rollover's step, at SIGHUP).
func (a *Agent) Rekey() error {
	a.mu.Lock()
	conns := slices.Collect(maps.Values(a.conns))
	a.mu.Unlock()
	return a.cfg.Rekey(false, a.sender, conns...)
}
