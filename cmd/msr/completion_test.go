package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBashCompletion: bash itself, with the script msr prints, completes
// msr's commands, a command's subcommands and its flags.
func TestBashCompletion(t *testing.T) {
	script, _, code := msr(t, "completion", "bash")
	if code != 0 || !strings.Contains(script, "complete -o default -o bashdefault -F _msr msr") {
		t.Fatalf("msr completion bash: exit %d:\n%s", code, script)
	}
	complete := func(words ...string) []string {
		t.Helper()
		// As bash calls it: COMP_WORDS the line, COMP_CWORD the word under
		// the cursor (the last).
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _msr; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
		cmd := exec.Command("bash", "-c", prog)
		cmd.Env = append(cmd.Environ(), "PATH="+filepath.Dir(msrBin)+":/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"msr", "la"}, []string{"lab"}},
		{[]string{"msr", "c"}, []string{"completion", "ctl"}},
		{[]string{"msr", "lab", ""}, []string{"up", "extend", "down", "status", "list", "exec", "-o", "--lab"}},
		{[]string{"msr", "ctl", "ro"}, []string{"routes", "route"}},
		{[]string{"msr", "demo", "up", "--mo"}, []string{"--monitoring"}},
		{[]string{"msr", "soak", "--la"}, []string{"--lab"}},
		{[]string{"msr", "help", "ro"}, []string{"router"}},
	} {
		got := complete(c.words...)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %q, want %q among them", c.words, got, w)
			}
		}
		for _, g := range got {
			if !strings.HasPrefix(g, c.words[len(c.words)-1]) {
				t.Errorf("%q: %q does not start with what was typed", c.words, g)
			}
		}
	}
}
