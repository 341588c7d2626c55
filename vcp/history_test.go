package vcp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestConfigHistory: entries numbered on, each file kept as applied, 0600
// in a 0700 directory (a config may hold a BGP password), the oldest
// forgotten past ten; a damaged record is an error, not a panic.
func TestConfigHistory(t *testing.T) {
	dir := t.TempDir()
	h, err := openHistory(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 13; i++ {
		e, err := h.add(vcpapi.ConfigEntry{Time: time.Now(), Who: "test", How: "reload", Changes: []string{}}, []byte(fmt.Sprintf("name: v%d\n", i)))
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != i || len(e.SHA256) != 64 {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	all, err := h.list()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != historyKeep || all[0].Seq != 4 || all[len(all)-1].Seq != 13 {
		t.Fatalf("kept %d entries, %d to %d: want the last %d, 4 to 13", len(all), all[0].Seq, all[len(all)-1].Seq, historyKeep)
	}
	if b, err := h.content(13); err != nil || string(b) != "name: v13\n" {
		t.Errorf("content 13: %q %v", b, err)
	}
	if _, err := h.content(3); err == nil {
		t.Error("content 3, forgotten, was found")
	}
	if fi, _ := os.Stat(h.dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("history directory mode %v, want 0700", fi.Mode().Perm())
	}
	for _, ext := range []string{".yaml", ".json"} {
		if fi, _ := os.Stat(h.path(13, ext)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", ext, fi.Mode().Perm())
		}
	}
	os.WriteFile(filepath.Join(h.dir, "000014.json"), []byte("{not json"), 0o600)
	if _, err := h.list(); err == nil {
		t.Error("a damaged record listed without an error")
	}
}

func TestParseConfirm(t *testing.T) {
	for s, want := range map[string]time.Duration{"2m": 2 * time.Minute, "10s": 10 * time.Second, "1h": time.Hour} {
		if d, err := vcpapi.ParseConfirm(s); err != nil || d != want {
			t.Errorf("%q: %v %v", s, d, err)
		}
	}
	for _, s := range []string{"", "9s", "61m", "2", "soon", "-1m"} {
		if _, err := vcpapi.ParseConfirm(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
