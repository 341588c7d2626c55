package xdp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Load loads spec into objs (a bpf2go objects struct). With pinDir, maps
// marked for pinning are pinned there, and maps already pinned there are
// reused: a restarted agent adopts the running state. A pinned map that
// an older build left with another layout (a field added to a value, a
// table grown) is migrated into one of the new layout (migrate.go), its
// state kept; Migrated says which. Over maps a later layout pinned, the
// load is refused (ErrDowngrade) unless o.Force. Without pinDir nothing
// is pinned. A verifier rejection comes back with the verifier's log.
func Load(spec *ebpf.CollectionSpec, objs any, pinDir string, o LoadOptions) ([]Migrated, error) {
	opts := &ebpf.CollectionOptions{}
	if pinDir != "" {
		opts.Maps.PinPath = pinDir
		if was := pinnedLayout(pinDir); o.Layout > 0 && was > o.Layout && !o.Force {
			return nil, fmt.Errorf("%w: the data path pinned in %s is of map layout %d, this build's is %d: what the later build keeps would be lost (force it to start anyway)",
				ErrDowngrade, pinDir, was, o.Layout)
		}
	} else {
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
		}
	}
	var migrated []Migrated
	err := spec.LoadAndAssign(objs, opts)
	if errors.Is(err, ebpf.ErrMapIncompatible) && pinDir != "" {
		aside, serr := setAside(spec, pinDir)
		if serr != nil {
			return nil, serr
		}
		if err = spec.LoadAndAssign(objs, opts); err == nil {
			if migrated, err = migrateAside(aside, pinDir, o); err != nil {
				if c, ok := objs.(io.Closer); ok {
					c.Close()
				}
			}
		}
		if err != nil {
			putBack(aside, pinDir)
		}
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%+v", ve)
		}
		return nil, err
	}
	if pinDir != "" && o.Layout > 0 {
		if err := pinLayout(pinDir, o.Layout); err != nil {
			if c, ok := objs.(io.Closer); ok {
				c.Close()
			}
			return nil, err
		}
	}
	return migrated, nil
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
