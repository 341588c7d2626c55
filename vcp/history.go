package vcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/msr-router/msr/vcp/vcpapi"
)

// historyKeep is how many applied configs the history keeps: `msr ctl
// rollback N` reaches back to the tenth.
const historyKeep = 10

// A configHistory keeps the config files the VCP applied, newest last,
// each with who applied it, when and how, in a directory of the state
// dir (0700; the files 0600: a config may hold a BGP password). Entry
// NNNNNN.yaml is the file as it was applied, NNNNNN.json what is known
// of it.
type configHistory struct {
	dir string
}

func openHistory(stateDir string) (*configHistory, error) {
	dir := filepath.Join(stateDir, "config-history")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("config history: %w", err)
	}
	return &configHistory{dir: dir}, nil
}

// list returns the entries, oldest first.
func (h *configHistory) list() ([]vcpapi.ConfigEntry, error) {
	names, err := filepath.Glob(filepath.Join(h.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []vcpapi.ConfigEntry
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var e vcpapi.ConfigEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("config history %s: %w", filepath.Base(name), err)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b vcpapi.ConfigEntry) int { return a.Seq - b.Seq })
	return out, nil
}

// add records content as applied, after the newest entry, and forgets
// all but the last historyKeep.
func (h *configHistory) add(e vcpapi.ConfigEntry, content []byte) (vcpapi.ConfigEntry, error) {
	all, err := h.list()
	if err != nil {
		return e, err
	}
	e.Seq = 1
	if len(all) > 0 {
		e.Seq = all[len(all)-1].Seq + 1
	}
	sum := sha256.Sum256(content)
	e.SHA256 = hex.EncodeToString(sum[:])
	if err := writePrivate(h.path(e.Seq, ".yaml"), content, nil); err != nil {
		return e, err
	}
	if err := h.put(e); err != nil {
		return e, err
	}
	all = append(all, e)
	for _, old := range all[:max(len(all)-historyKeep, 0)] {
		os.Remove(h.path(old.Seq, ".json"))
		os.Remove(h.path(old.Seq, ".yaml"))
	}
	return e, nil
}

// put writes an entry's record (a new one, or one confirmed).
func (h *configHistory) put(e vcpapi.ConfigEntry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(h.path(e.Seq, ".json"), append(b, '\n'), nil)
}

// content is the file entry seq applied.
func (h *configHistory) content(seq int) ([]byte, error) {
	b, err := os.ReadFile(h.path(seq, ".yaml"))
	if err != nil {
		return nil, fmt.Errorf("config history: no config %d: %w", seq, err)
	}
	return b, nil
}

func (h *configHistory) path(seq int, ext string) string {
	return filepath.Join(h.dir, fmt.Sprintf("%06d%s", seq, ext))
}
