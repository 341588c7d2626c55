package router

import (
	"time"

	"github.com/msr-router/msr/internal/iflink"
)

// The back-end's one interface as a link: its state (carrier, MTU, speed,
// duplex) is the kernel's, read at start and followed through rtnetlink's
// link events with a poll behind them, as the LB's ports are
// (lb/links.go); a hello reports the state last followed.
//
// A hello that read the link itself waited for the kernel's RTNL lock
// (RTM_GETLINK and the ethtool ioctl take it), and every back-end's hellos
// waited together while that lock was held for long (which process held
// it is not known: docs/reliability.md, finding 19): the LBs and the VCPs
// heard every back-end fall silent at once while the LBs' own hellos kept
// coming, the LBs kept them (all_backends_silent), and a VCP pushed them
// a table of none (docs/reliability.md, finding 20). Now
// only the follower waits.

// linkPoll is how often the interface is read besides the events.
const linkPoll = time.Second

// readLink reads the interface's state once.
func (a *Agent) readLink() {
	a.linkMu.Lock()
	read := a.readLinkState
	a.linkMu.Unlock()
	if read == nil {
		read = iflink.Read
	}
	s, err := read(a.cfg.Interface)
	if err != nil {
		a.log.Warn("read port state", "interface", a.cfg.Interface, "err", err)
		return
	}
	a.linkChanged(s)
}

// followLink follows the interface's state until done is closed.
func (a *Agent) followLink(done <-chan struct{}) {
	if err := iflink.Watch([]string{a.cfg.Interface}, done, a.linkChanged); err != nil {
		a.log.Warn("follow port state: polling only", "err", err)
	}
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		a.readLink()
	}
}

// linkChanged records the interface's new state; a change of whether it
// is up is logged and told in a hello at once.
func (a *Agent) linkChanged(s iflink.State) {
	if s.Name != a.cfg.Interface {
		return
	}
	a.linkMu.Lock()
	was := a.port
	a.port = s
	a.linkMu.Unlock()
	if was.Name != "" && s.Up() != was.Up() {
		a.log.Info("port state", "interface", s.Name, "up", s.Up(), "admin_up", s.AdminUp, "carrier", s.Carrier, "oper", s.OperState)
		a.sendHello()
	}
}

// portLink is the interface's state as last followed.
func (a *Agent) portLink() iflink.State {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	return a.port
}
