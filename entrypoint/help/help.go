// Package help writes each mode's --help of paddle-entrypoint: only the
// flags that mode reads, each with its type, variable and default.
package help

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/drain"
)

// Each mode's --help lists only the flags that mode reads: run mode its
// settings, labels the ones that decide the labels, and spool (or one
// spool subcommand) the node's spool settings and its own flags.

// spoolSettings are the settings a spool command reads.
var spoolSettings = set("spool-path", "spool-max", "spool-max-age",
	"monitor-url", "monitor-token-file", "monitor-ca-file", "log-level", "log-format")

// labelsSettings are the settings `labels` reads: the labels' policy and
// the GPU probe (the labels include the GPU count).
var labelsSettings = set("labels-mode", "policy", "gpu-probe", "gpu-timeout", "log-level", "log-format")

// set is a set of flag names.
func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// printHelp writes mode's usage and the flags named by keep (every flag
// when keep is nil) to w.
func printHelp(w io.Writer, flags *config.FlagSet, head string, keep func(name string) bool) {
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, "\nflags:")
	if keep != nil {
		for _, name := range flagNames(flags) {
			if !keep(name) {
				flags.MarkHidden(name)
			}
		}
	}
	flags.Usage(w)
}

func flagNames(flags *config.FlagSet) []string {
	var names []string
	flags.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// Run is `paddle-entrypoint --help`.
func Run(w io.Writer, flags *config.FlagSet, usage string) {
	printHelp(w, flags, usage, nil)
}

// Labels is `paddle-entrypoint labels --help`.
func Labels(w io.Writer, flags *config.FlagSet) {
	printHelp(w, flags, "usage: paddle-entrypoint labels [flags]\n\n"+
		"Print the labels a start with this environment would write, one key=value per line; exit 0, or 65 when they are rejected.",
		func(name string) bool { return labelsSettings[name] })
}

// Spool is `paddle-entrypoint spool [SUBCOMMAND] --help`: the
// subcommand's flags when args name one, else every spool flag.
func Spool(w io.Writer, flags *config.FlagSet, args []string) {
	sub := ""
	for _, a := range args {
		if _, ok := drain.Flags[a]; ok {
			sub = a
			break
		}
	}
	var head strings.Builder
	if sub == "" {
		head.WriteString("usage: paddle-entrypoint spool list|stats|flush|requeue|purge [flags]\n")
		for _, c := range drain.Commands {
			fmt.Fprintf(&head, "\n  %-8s %s", c.Name, c.Summary)
		}
	} else {
		fmt.Fprintf(&head, "usage: paddle-entrypoint spool %s [flags]\n", sub)
		for _, c := range drain.Commands {
			if c.Name == sub {
				fmt.Fprintf(&head, "\n%s.", strings.ToUpper(c.Summary[:1])+c.Summary[1:])
			}
		}
	}
	printHelp(w, flags, head.String(), func(name string) bool {
		if spoolSettings[name] {
			return true
		}
		for s, own := range drain.Flags {
			if (sub == "" || s == sub) && slices.Contains(own, name) {
				return true
			}
		}
		return false
	})
}
