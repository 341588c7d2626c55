// Package netns runs code inside a named network namespace.
//
// A namespace is entered with setns(2) on a locked OS thread, never with
// `ip netns exec`: that remounts /sys and hides /sys/fs/bpf (docs/lab.md).
// What the function creates (sockets, XDP attachments, DEVMAP entries)
// belongs to the namespace it ran in, and stays usable from any thread.
package netns

import (
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir is where `ip netns add` keeps its namespaces' bind mounts.
const Dir = "/var/run/netns"

// Path returns the bind-mount path of a named namespace.
func Path(name string) string { return filepath.Join(Dir, name) }

// Do runs fn on an OS thread that is inside the named namespace. The
// thread returns to its original namespace afterwards; if it cannot, it
// is left locked so that the Go runtime discards it rather than reuse a
// thread in the wrong namespace.
func Do(name string, fn func() error) error {
	target, err := unix.Open(Path(name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", name, err)
	}
	defer unix.Close(target)

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open current network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- fmt.Errorf("leave network namespace %s: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
