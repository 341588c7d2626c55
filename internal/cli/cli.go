// Package cli holds what every msr subcommand shares: flags that may come
// before or after positional arguments, `-o json` output, and errors a user
// can act on.
package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// ErrUsage marks an error in how a command was called; main prints the
// command's usage after it.
var ErrUsage = errors.New("usage")

// HelpError is -h or --help among a command's flags: main prints the
// command's usage and these flags, to stdout, and exits 0.
type HelpError struct{ Flags *flag.FlagSet }

func (*HelpError) Error() string { return "help requested" }

// PrintFlags writes every flag of the set with its description.
func (h *HelpError) PrintFlags(w io.Writer) {
	h.Flags.SetOutput(w)
	h.Flags.PrintDefaults()
	h.Flags.SetOutput(io.Discard)
}

// Usagef returns a usage error with a message.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// Output is the -o flag: "text" (default) or "json".
type Output string

// AddOutput registers -o on fs.
func AddOutput(fs *flag.FlagSet) *Output {
	o := Output("text")
	fs.Var(&o, "o", "output format: text or json")
	return &o
}

func (o *Output) String() string { return string(*o) }

// Set accepts text or json.
func (o *Output) Set(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("output format %q: use text or json", s)
	}
	*o = Output(s)
	return nil
}

// Print writes v as one JSON document, or calls text for people.
func (o Output) Print(w io.Writer, v any, text func(io.Writer)) error {
	if o == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(w)
	return nil
}

// Parse parses args with fs, allowing flags after positional arguments
// (msr lab status default -o json). It returns the positional arguments
// before "--" and everything after it.
func Parse(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	fs.SetOutput(io.Discard)
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, &HelpError{Flags: fs}
			}
			return nil, nil, Usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, rest, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// Fatal prints err for a user and exits non-zero.
func Fatal(err error) {
	fmt.Fprintf(os.Stderr, "msr: %v\n", err)
	os.Exit(1)
}
