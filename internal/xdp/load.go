package xdp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Load loads spec into objs (a bpf2go objects struct). With pinDir, maps
// marked for pinning are pinned there, and maps already pinned there are
// reused: a restarted agent adopts the running state. A pinned map that
// an older version of the program left with another layout (a counter
// added to a value) is unpinned and made anew: its state is lost, the
// rest is adopted. Without pinDir nothing is pinned. A verifier rejection
// comes back with the verifier's log.
func Load(spec *ebpf.CollectionSpec, objs any, pinDir string) error {
	opts := &ebpf.CollectionOptions{}
	if pinDir != "" {
		opts.Maps.PinPath = pinDir
	} else {
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
		}
	}
	err := spec.LoadAndAssign(objs, opts)
	if errors.Is(err, ebpf.ErrMapIncompatible) && pinDir != "" {
		if n := unpinIncompatible(spec, pinDir); n > 0 {
			err = spec.LoadAndAssign(objs, opts)
		}
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("%+v", ve)
		}
		return err
	}
	return nil
}

// unpinIncompatible removes the maps pinned in pinDir whose type, key,
// value or size differ from spec's, and says how many it removed.
func unpinIncompatible(spec *ebpf.CollectionSpec, pinDir string) int {
	n := 0
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName {
			continue
		}
		path := filepath.Join(pinDir, name)
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			continue
		}
		info, err := m.Info()
		m.Close()
		if err != nil {
			continue
		}
		if info.Type != ms.Type || info.KeySize != ms.KeySize || info.ValueSize != ms.ValueSize || info.MaxEntries != ms.MaxEntries {
			if os.Remove(path) == nil {
				n++
			}
		}
	}
	return n
}

// Attach attaches prog to an interface in native (driver) mode.
func Attach(prog *ebpf.Program, ifindex int) (link.Link, error) {
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach xdp to ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// AdoptOrAttach keeps the XDP link pinned at path by a previous run on the
// same interface, replacing its program in place (forwarding never stops),
// or attaches prog in native mode and pins the new link. adopted says
// which.
func AdoptOrAttach(path string, prog *ebpf.Program, ifindex int) (l link.Link, adopted bool, err error) {
	if old, err := link.LoadPinnedLink(path, nil); err == nil {
		info, ierr := old.Info()
		if ierr == nil && info.XDP() != nil && int(info.XDP().Ifindex) == ifindex && old.Update(prog) == nil {
			return old, true, nil
		}
		old.Unpin()
		old.Close()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	if l, err = Attach(prog, ifindex); err != nil {
		return nil, false, err
	}
	if err := l.Pin(path); err != nil {
		l.Close()
		return nil, false, fmt.Errorf("pin XDP link: %w", err)
	}
	return l, false, nil
}
