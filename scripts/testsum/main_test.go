package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestTally reads a recorded run (testdata/run.json: a pass, a skip, a
// test failed by its subtest) and wants plain go test's output of the
// failure and the one-line outcome.
func TestTally(t *testing.T) {
	f, err := os.Open("testdata/run.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := newTally()
	var out strings.Builder
	in := bufio.NewScanner(f)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		tl.add(e, &out)
	}
	tl.summary(&out)
	s := out.String()
	for _, want := range []string{"a_test.go:5: before", "a_test.go:5: sub broke", "--- FAIL: TestFail (",
		"skip x.TestSkip: a_test.go:4: precondition: no thing", "FAIL x.TestFail/sub", "\n1 passed, 1 failed, 1 skipped in 1 packages (1 failed)\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "hello") {
		t.Errorf("a passing test's output printed:\n%s", s)
	}
	if tl.ok() {
		t.Error("a run with a failure is ok")
	}
}
