// Package labtest brings labs up for tests: from the text of a lab file,
// removed when the test ends, pass or fail.
package labtest

import (
	"testing"

	"github.com/msr-router/msr/lab"
)

// Up builds the lab described by text and registers its removal.
func Up(t testing.TB, text string) (*lab.Spec, *lab.State) {
	t.Helper()
	spec, err := lab.Load("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	st, err := lab.Up(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Down(spec.Name) })
	return spec, st
}
