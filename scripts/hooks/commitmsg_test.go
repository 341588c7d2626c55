// Package hooks holds the repository's git hooks; its test runs them.
package hooks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommitMsg: the commit-msg hook takes the project's form and refuses
// a long subject, a subject without its area, and a body with no blank
// line before it.
func TestCommitMsg(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want string // in the refusal; "" to take it
	}{
		{"router: pop the tag once\n\nThe detail.\n", ""},
		{"vcp, e2e: uRPF is reloadable\n", ""},
		{"# a comment git strips\ndeploy: units without CAP_SYS_ADMIN\n", ""},
		{"Merge branch 'x'\n", ""},
		{"router: " + strings.Repeat("a", 65) + "\n", "73 characters"},
		{"Pop the tag once\n", `"area: what it does"`},
		{"router:pop\n", `"area: what it does"`},
		{"router: pop the tag once\nThe detail.\n", "a blank line"},
	} {
		f := filepath.Join(t.TempDir(), "COMMIT_EDITMSG")
		if err := os.WriteFile(f, []byte(c.msg), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", "commit-msg", f).CombinedOutput()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q refused: %s", c.msg, out)
		case c.want != "" && (err == nil || !strings.Contains(string(out), c.want)):
			t.Errorf("%q: %v %q, want a refusal saying %q", c.msg, err, out, c.want)
		}
	}
}
