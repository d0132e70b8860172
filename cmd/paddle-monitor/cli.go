package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/program"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
)

// commands are the subcommands, in the order usage lists them: each line
// of the usage, and what its --help says above the flags.
var commands = []struct{ name, synopsis, summary string }{
	{"serve", "serve  [flags]", "Serve the monitor API, the cost page and /metrics until SIGTERM (docs/monitor.md)."},
	{"report", "report [flags]", "Print GPU-hours and cost per project (or --by other keys) for a window; default: the current UTC month."},
	{"token", "token  NAME (--project GLOB)... [(--owner GLOB)...] [--add-to FILE] | NAME --admin [--add-to FILE] | NAME --node NODE [--add-to FILE] | NAME --role viewer [(--project GLOB)...] [(--owner GLOB)...] [--add-to FILE]",
		"Mint a token: the secret on the first line, its tokens-file entry (SHA-256 only) on the second; --add-to FILE appends the entry to a tokens file. --role viewer mints a read-only token (no glob: it reads every project)."},
	{"ledger", "ledger [--month M | --from T --to T] [--by node|model|project|namespace|state] [--format table|json|csv] [flags]",
		"Print the fleet's GPU-hours from the node reports: capacity and its five states (attributed, undeclared, unattributed, unallocated, unobserved) with their costs."},
	{"discrepancies", "discrepancies [--month M | --from T --to T] [flags]",
		"Print, as JSON, where what the tasks declared differs from what the nodes observed, and the undeclared and unattributed users."},
	{"node", "node   retire NODE [--db DB]", "Retire a node: its GPUs stop counting in the ledger now, and another node may report them (a moved GPU)."},
	{"version", "version   (also --version)", "Print the version."},
}

// usage is the program's usage, every command on a line.
func usage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  paddle-monitor %s\n", c.synopsis)
	}
	b.WriteString("\nRun 'paddle-monitor COMMAND --help' for a command's flags.\n")
	return b.String()
}

// commandNames are the commands' names, in the usage's order.
func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// errUsage marks a usage error (exit 2).
var errUsage = errors.New("usage")

// helpRequested is a command's --help: its usage line and flags go to
// stdout, exit 0.
type helpRequested struct{ command, flags string }

func (h *helpRequested) Error() string { return h.command + ": help requested" }

// text is the command's help: its own usage line and summary, then its
// flags with their descriptions and defaults (pflag's usual listing).
func (h *helpRequested) text() string {
	var b strings.Builder
	for _, c := range commands {
		if c.name == h.command {
			fmt.Fprintf(&b, "usage: paddle-monitor %s\n\n%s\n", c.synopsis, c.summary)
		}
	}
	fmt.Fprintf(&b, "\nflags:\n%s", h.flags)
	return b.String()
}

// parseFlags parses a command's flags: --help is helpRequested, any other
// problem a usage error naming the command.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return &helpRequested{fs.Name(), fs.FlagUsages()}
	case err != nil:
		return fmt.Errorf("%w: %s: %v", errUsage, fs.Name(), err)
	}
	return nil
}

// parseNoArgs parses the flags of a command that takes no arguments and
// refuses any, naming the command as typed (cmd).
func parseNoArgs(fs *pflag.FlagSet, args []string, cmd string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, cmd, fs.Args())
	}
	return nil
}

// settle parses the flags of a command that takes no arguments (cmd, as
// typed) and resolves its settings table into dst.
func settle[T any](fs *pflag.FlagSet, args []string, cmd string, t settings.Table[T], dst *T) error {
	if err := parseNoArgs(fs, args, cmd); err != nil {
		return err
	}
	return resolve(t, dst, fs)
}

// flagsOf is a command's flag set, its settings table's flags defined
// (pflag's own output discarded: run prints the errors and the help).
func flagsOf[T any](name string, t settings.Table[T]) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	t.Define(fs)
	return fs
}

// run is the whole program; its result is the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(args[1:], stderr)
	case "token":
		err = token(args[1:], stdout)
	case "report":
		err = reportCmd(args[1:], stdout)
	case "node":
		err = nodeCmd(args[1:], stdout)
	case "ledger", "discrepancies":
		err = ledgerCmd(args[0], args[1:], stdout)
	case "migrate":
		err = migrateCmd(args[1:], stdout)
	case "version", "--version":
		err = versionCmd(args[1:], stdout)
	case "help", "--help", "-h":
		// help COMMAND is COMMAND --help.
		if len(args) > 1 && args[1] != "version" && args[1] != "help" {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage())
	default:
		var ok bool
		if err, ok = runBooks(args[0], args[1:], stdout); !ok {
			err = fmt.Errorf("%w: unknown command %q (allowed: %s)", errUsage, args[0], strings.Join(commandNames(), ", "))
		}
	}
	var help *helpRequested
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.text())
		return 0
	case errors.Is(err, errUsage):
		// One line naming the bad value (and the allowed ones), not the
		// whole usage: the error is what the user needs to see.
		return prog().Usage(stderr, err, "")
	default:
		fmt.Fprintln(stderr, "paddle-monitor:", err)
		return 1
	}
}

// versionCmd prints "paddle-monitor version X", the entrypoint's format
// (and tini's, and dcgm-exporter's).
func versionCmd(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: version takes no arguments, got %q", errUsage, args)
	}
	return prog().PrintVersion(stdout)
}

// prog is the monitor as the programs' shared shell sees it: usage errors
// exit 2, its version line, its logger (no prefix, no "logger" field: its
// stderr is its own).
func prog() program.Program { return program.Program{Name: "paddle-monitor", Version: version} }

// Settings that come from flags and the environment are settings tables
// (package settings) with the Refuse policy: a deployment's settings are
// its own, so a malformed variable stops the command, naming it
// (docs/monitor.md).

// entry is one setting of a command whose settings struct is T.
type entry[T any] = settings.Entry[T]

// str stores a string setting in the field field returns.
func str[T any](field func(*T) *string) func(*T, string) error {
	return func(c *T, s string) error { *field(c) = s; return nil }
}

// sourceEntries are the settings serve and report share: the database
// (a secret: PADDLE_MONITOR_DB_FILE may name a file holding it), the
// prices and the budgets.
func sourceEntries[T any](src func(*T) *sources, pricesDoc, budgetsDoc string) []entry[T] {
	return []entry[T]{
		{Flag: "db", Var: "PADDLE_MONITOR_DB", Type: "string", Default: "paddle-monitor.db", Doc: "SQLite file, or postgres:// URL", Secret: true,
			Parse: str(func(c *T) *string { return &src(c).db })},
		{Flag: "prices", Var: "PADDLE_MONITOR_PRICES", Type: "string", Doc: pricesDoc,
			Parse: str(func(c *T) *string { return &src(c).prices })},
		{Flag: "budgets", Var: "PADDLE_MONITOR_BUDGETS", Type: "string", Doc: budgetsDoc,
			Parse: str(func(c *T) *string { return &src(c).budgets })},
	}
}

// sources are where serve and report read tasks, prices and budgets.
type sources struct{ db, prices, budgets string }

// resolve reads a command's settings after its flags are parsed: a
// malformed flag is a usage error naming the command, a malformed
// variable an error naming it (exit 1).
func resolve[T any](t settings.Table[T], dst *T, fs *pflag.FlagSet) error {
	_, err := t.Resolve(dst, fs, os.LookupEnv)
	if fe, ok := errors.AsType[*settings.FlagError](err); ok {
		return fmt.Errorf("%w: %s: --%s: %v", errUsage, fs.Name(), fe.Flag, fe.Err)
	}
	return err
}

// newLogger builds the slog logger of --log-level and --log-format
// (program.Program.Logger), naming the setting a bad value came from.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	lv, err := program.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level / PADDLE_MONITOR_LOG %q: %w", level, err)
	}
	log, err := prog().Logger(w, lv, format)
	if err != nil {
		return nil, fmt.Errorf("--log-format / PADDLE_MONITOR_LOG_FORMAT %q: %w", format, err)
	}
	return log, nil
}
