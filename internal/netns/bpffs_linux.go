package netns

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// BPFFS is where BPF objects are pinned.
const BPFFS = "/sys/fs/bpf"

// EnsureBPFFS mounts the BPF filesystem at BPFFS unless it is there
// already (some machines boot without it).
func EnsureBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(BPFFS, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", BPFFS, err)
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs on %s (systemd mounts it at boot; without CAP_SYS_ADMIN an agent cannot): %w", BPFFS, err)
	}
	return nil
}
