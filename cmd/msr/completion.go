package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Shell completion: `msr completion bash` prints a script for bash's
// `complete`, which asks the binary itself (`msr __complete WORDS...`) for
// the words that may come next, so that it never goes out of date: the
// commands, each command's subcommands and flags as its usage lists them.
// Where no word fits (a FILE, a NAME), bash completes file names.

const bashCompletion = `# bash completion for msr: source it, or put it in
# /usr/share/bash-completion/completions/msr (msr completion bash > ...).
_msr() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local IFS=$'\n'
	local words
	words=$(msr __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null) || return
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -o bashdefault -F _msr msr
`

func runCompletion(args []string) error {
	if len(args) != 1 || args[0] != "bash" {
		return fmt.Errorf("usage: msr completion bash (bash is the one shell msr writes completion for)")
	}
	fmt.Print(bashCompletion)
	return nil
}

// topLevel are the words msr takes first besides its commands.
var topLevel = []string{"help", "version", "completion"}

var (
	usageFlag = regexp.MustCompile(`(?:^|[\s\[|(])(--[a-z][a-z0-9-]*|-o)\b`)
	usageSub  = regexp.MustCompile(`^    ([a-z][a-z0-9-]*)\b`)
)

// completions are the words that may follow words (the command line
// after "msr", without the word being completed).
func completions(words []string) []string {
	if len(words) == 0 {
		return append(slices.Sorted(func(yield func(string) bool) {
			for n := range commands {
				if !yield(n) {
					return
				}
			}
		}), topLevel...)
	}
	switch words[0] {
	case "help":
		if len(words) == 1 {
			return completions(nil)[:len(commands)]
		}
		return nil
	case "completion":
		return []string{"bash"}
	}
	c, ok := commands[words[0]]
	if !ok {
		return nil
	}
	subs, flags := usageWords(words[0], c.usage)
	if len(words) == 1 {
		return append(subs, flags...)
	}
	return flags
}

// usageWords reads a command's subcommands and flags from its usage text.
func usageWords(name, usage string) (subs, flags []string) {
	seen := map[string]bool{}
	add := func(list *[]string, w string) {
		if !seen[w] {
			seen[w] = true
			*list = append(*list, w)
		}
	}
	for _, line := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "msr "+name+" "); ok {
			if f := strings.Fields(rest); len(f) > 0 && usageSub.MatchString("    "+f[0]) {
				add(&subs, f[0])
			}
		} else if m := usageSub.FindStringSubmatch(line); m != nil {
			add(&subs, m[1])
		}
		for _, m := range usageFlag.FindAllStringSubmatch(line, -1) {
			add(&flags, m[1])
		}
	}
	return subs, flags
}
