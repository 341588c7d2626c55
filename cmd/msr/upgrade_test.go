package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckBinary: an agent execs, on an API call, only an absolute path
// to a regular file that only its owner (root or the agent's user) may
// write, in a directory the same, that says it is msr.
func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "msr")
	os.WriteFile(good, []byte("#!/bin/sh\necho msr v9 commit abc go1.26\n"), 0o755)
	if v, err := checkBinary(good); err != nil || v != "msr v9 commit abc go1.26" {
		t.Errorf("a good binary: %q %v", v, err)
	}
	liar := filepath.Join(dir, "liar")
	os.WriteFile(liar, []byte("#!/bin/sh\necho not this\n"), 0o755)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("#!/bin/sh\necho msr v9\n"), 0o755)
	os.Chmod(open, 0o757)
	shared := t.TempDir()
	os.Chmod(shared, 0o777)
	inShared := filepath.Join(shared, "msr")
	os.WriteFile(inShared, []byte("#!/bin/sh\necho msr v9\n"), 0o755)
	for bin, want := range map[string]string{
		"msr":      "an absolute path",
		dir:        "not a regular file",
		liar:       "not an msr binary",
		open:       "writable by others",
		inShared:   "writable by others",
		"/nowhere": "no such file",
	} {
		if _, err := checkBinary(bin); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bin, err, want)
		}
	}
}
