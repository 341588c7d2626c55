package vcp

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// The files the VCP writes for its daemons hold secrets (TCP-MD5 and
// routing-protocol keys, SNMP users, the RIB feed's password): each is
// 0600, its owner the daemon that reads it, written whole or not at all;
// a directory of them is 0700, or 0711 where another daemon's user must
// pass through it to its own (FRR's, under the run directory).

// runDirMode is the run directory's mode: FRR's daemons, which run as
// frr, BIRD as bird and snmpd as Debian-snmp where those users exist,
// pass through it to their own files.
func runDirMode(r *RoutingConfig) os.FileMode {
	if r != nil && r.Suite == "frr" || daemonUser("bird") != nil || daemonUser(snmpUser) != nil {
		return 0o711
	}
	return 0o700
}

// owner is a file's user and group; nil is root's.
type owner struct{ uid, gid int }

// daemonUser is the owner for files a daemon of the named user reads (FRR's
// "frr"), nil if no such user exists (the daemon then runs as root).
func daemonUser(name string) *owner {
	u, err := user.Lookup(name)
	if err != nil {
		return nil
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &owner{uid, gid}
}

// reachable says whether user o may pass through dir and every
// directory above it: each open to others, or o's own, or its group's.
func reachable(dir string, o *owner) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		m := fi.Mode().Perm()
		if !ok || !(m&0o001 != 0 || int(st.Uid) == o.uid && m&0o100 != 0 || int(st.Gid) == o.gid && m&0o010 != 0) {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}

// runAs is the user a daemon of the named user runs as with files in
// dir: that user where it exists and can reach dir, else nil (root), as
// a test's private temporary directory leaves it.
func runAs(name, dir string) *owner {
	if o := daemonUser(name); o != nil && reachable(dir, o) {
		return o
	}
	return nil
}

// privateDir makes dir (and its parents) with mode, which it forces on
// an existing one too, owned by o.
func privateDir(dir string, mode os.FileMode, o *owner) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	if o != nil {
		return os.Chown(dir, o.uid, o.gid)
	}
	return nil
}

// writePrivate writes data to path, 0600 and owned by o: in a temporary
// file beside it, renamed over it, so that a reader sees the old file or
// the new one, never a part, and never a mode wider than 0600.
func writePrivate(path string, data []byte, o *owner) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename; a failed write's leftover
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && o != nil {
		err = os.Chown(tmp, o.uid, o.gid)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
