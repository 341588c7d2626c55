package vcp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/msr-router/msr/vcp/vcpapi"
)

// Commit-confirmed changes, rollback and the history of applied configs,
// as Junos has them: `msr ctl reload --confirm 2m` applies the file and
// rolls it back unless `msr ctl confirm` comes within 2 minutes (a change
// that cut the operator off undoes itself); `msr ctl rollback N` applies
// the config applied N changes ago; `msr ctl history` lists the last ten,
// with who applied each and when. A rollback writes the config it returns
// to into the config file, so that the file is always what runs.

// ReloadOptions are a reload's. DryRun checks and compares only. Confirm,
// if set, rolls the change back unless Confirm is called within it. Who
// applied it, for the history.
type ReloadOptions struct {
	DryRun  bool
	Confirm time.Duration
	Who     string
	// how the history says it was applied, and the config to apply
	// instead of the file's (a rollback's): written to the file once
	// applied.
	how  string
	data []byte
}

// pendingConfirm is a commit-confirmed change waiting for its confirm:
// the timer that rolls back to the config of seq back, and the entries
// applied since, all confirmed by one confirm.
type pendingConfirm struct {
	timer *time.Timer
	back  int
	seqs  []int
}

// openHistory opens the history of the config file in the state dir and
// records the file as started with if it is not the last one applied. A
// change left pending by a VCP that stopped is rolled back when its time
// is up, counting from when it was applied.
func (a *Agent) openHistory() error {
	if a.cfg.StateDir == "" || a.cfg.Pos.File == "" {
		return nil
	}
	h, err := openHistory(a.cfg.StateDir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(a.cfg.Pos.File)
	if err != nil {
		return err
	}
	all, err := h.list()
	if err != nil {
		return err
	}
	a.history = h
	sum := sha256.Sum256(data)
	if n := len(all); n > 0 && all[n-1].SHA256 == hex.EncodeToString(sum[:]) {
		if last := all[n-1]; last.Pending {
			back := 0
			for _, e := range all {
				if !e.Pending {
					back = e.Seq
					continue
				}
				a.pending = a.armConfirm(a.pending, time.Until(last.ConfirmBy), e.Seq)
				a.pending.back = back
			}
		}
		return nil
	}
	_, err = h.add(vcpapi.ConfigEntry{Time: time.Now(), Who: "msr vcp", How: "start", Changes: []string{}}, data)
	return err
}

// armConfirm (re)starts the rollback timer of p (nil: a new one) to fire
// in d, at least a second from now, with seq among the entries it
// confirms or rolls back. Call with reloadMu held, or before the agent
// runs.
func (a *Agent) armConfirm(p *pendingConfirm, d time.Duration, seq int) *pendingConfirm {
	if p == nil {
		p = &pendingConfirm{}
	} else {
		p.timer.Stop()
	}
	if !slices.Contains(p.seqs, seq) {
		p.seqs = append(p.seqs, seq)
	}
	d = max(d, time.Second)
	p.timer = time.AfterFunc(d, func() { a.rollbackUnconfirmed(p, d) })
	return p
}

// rollbackUnconfirmed applies the config before a commit-confirmed change
// whose confirm did not come.
func (a *Agent) rollbackUnconfirmed(p *pendingConfirm, d time.Duration) {
	a.reloadMu.Lock()
	if a.pending != p { // confirmed, or another change took it over
		a.reloadMu.Unlock()
		return
	}
	a.reloadMu.Unlock()
	how := fmt.Sprintf("rollback to config %d: not confirmed within %v", p.back, d)
	res, err := a.rollbackTo(p.back, "msr vcp", how, p)
	if err != nil {
		a.log.Error("commit-confirmed change not confirmed, and its rollback failed", "to", p.back, "err", err)
		return
	}
	a.log.Warn("commit-confirmed change not confirmed: rolled back", "to", p.back, "changes", len(res.Changes))
}

// Confirm confirms the commit-confirmed changes pending: they stay.
func (a *Agent) Confirm(who string) (*vcpapi.HistoryView, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.pending == nil {
		return nil, errors.New("nothing to confirm: no change applied with --confirm is waiting")
	}
	if err := a.confirmPending(who); err != nil {
		return nil, err
	}
	return a.historyView()
}

// confirmPending stops the pending change's timer and marks its entries
// confirmed by who. Call with reloadMu held.
func (a *Agent) confirmPending(who string) error {
	if a.pending == nil {
		return nil
	}
	a.log.Info("commit-confirmed change confirmed", "by", who)
	return a.settlePending(func(e *vcpapi.ConfigEntry) { e.ConfirmedBy = who })
}

// settlePending stops the pending change's timer and ends the wait of its
// entries, marked by mark. Call with reloadMu held.
func (a *Agent) settlePending(mark func(*vcpapi.ConfigEntry)) error {
	p := a.pending
	p.timer.Stop()
	a.pending = nil
	all, err := a.history.list()
	if err != nil {
		return err
	}
	for _, e := range all {
		if slices.Contains(p.seqs, e.Seq) && e.Pending {
			e.Pending = false
			mark(&e)
			if err := a.history.put(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Rollback applies the config applied n changes ago (1: the one before
// the running one), as a reload of it.
func (a *Agent) Rollback(n int, who string) (*vcpapi.ReloadResult, error) {
	if a.history == nil {
		return nil, errors.New("no history of configs: the VCP has no state_dir")
	}
	all, err := a.history.list()
	if err != nil {
		return nil, err
	}
	if n < 1 || n >= len(all) {
		return nil, fmt.Errorf("rollback %d: the history holds %d configs before the running one (msr ctl history)", n, len(all)-1)
	}
	seq := all[len(all)-1-n].Seq
	return a.rollbackTo(seq, who, fmt.Sprintf("rollback %d, to config %d", n, seq), nil)
}

// rollbackTo reloads the config of entry seq. If p is set (an unconfirmed
// change's timer), nothing happens unless p is still the pending one.
func (a *Agent) rollbackTo(seq int, who, how string, p *pendingConfirm) (*vcpapi.ReloadResult, error) {
	data, err := a.history.content(seq)
	if err != nil {
		return nil, err
	}
	return a.reload(ReloadOptions{Who: who, how: how, data: data}, p)
}

// History is the configs applied, newest first.
func (a *Agent) History() (*vcpapi.HistoryView, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	return a.historyView()
}

func (a *Agent) historyView() (*vcpapi.HistoryView, error) {
	v := &vcpapi.HistoryView{Entries: []vcpapi.ConfigEntry{}}
	if a.history == nil {
		return v, nil
	}
	all, err := a.history.list()
	if err != nil {
		return nil, err
	}
	slices.Reverse(all)
	v.Entries = all
	return v, nil
}

// record adds an applied config to the history and arms or settles the
// confirm timer: a change with Confirm waits for its confirm; one without
// confirms what was pending (as a plain commit does in Junos); a rollback
// ends what was pending. Call with reloadMu held.
func (a *Agent) record(o ReloadOptions, changes []string, data []byte) (*vcpapi.ConfigEntry, error) {
	if a.history == nil {
		return nil, nil
	}
	all, err := a.history.list()
	if err != nil {
		return nil, err
	}
	e := vcpapi.ConfigEntry{Time: time.Now(), Who: o.Who, How: o.how, Changes: changes}
	if e.How == "" {
		e.How = "reload"
	}
	if o.Confirm > 0 {
		e.How = fmt.Sprintf("reload, confirm within %v", o.Confirm)
		e.Pending, e.ConfirmBy = true, e.Time.Add(o.Confirm)
	}
	switch {
	case o.data != nil && a.pending != nil: // a rollback ends the wait
		if err := a.settlePending(func(e *vcpapi.ConfigEntry) { e.RolledBack = true }); err != nil {
			return nil, err
		}
	case o.Confirm == 0:
		if err := a.confirmPending(o.Who); err != nil {
			return nil, err
		}
	}
	added, err := a.history.add(e, data)
	if err != nil {
		return nil, err
	}
	if o.Confirm > 0 {
		back := 0
		if len(all) > 0 {
			back = all[len(all)-1].Seq
		}
		if a.pending != nil {
			back = a.pending.back // to before the first unconfirmed change
		}
		a.pending = a.armConfirm(a.pending, o.Confirm, added.Seq)
		a.pending.back = back
	}
	return &added, nil
}

// writeConfigFile puts data in the config file, keeping its mode and
// owner, so that the file says what runs after a rollback.
func writeConfigFile(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := writePrivate(path, data, nil); err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		os.Chown(path, int(st.Uid), int(st.Gid))
	}
	return os.Chmod(path, fi.Mode().Perm())
}
