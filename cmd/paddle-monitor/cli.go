package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// commands are the subcommands, in the order usage lists them: each line
// of the usage, and what its --help says above the flags.
var commands = []struct{ name, synopsis, summary string }{
	{"serve", "serve  [flags]", "Serve the monitor API, the cost page and /metrics until SIGTERM (docs/monitor.md)."},
	{"report", "report [flags]", "Print GPU-hours and cost per project (or --by other keys) for a window; default: the current UTC month."},
	{"token", "token  NAME (--project GLOB)... [(--owner GLOB)...] [--add-to FILE] | NAME --admin [--add-to FILE]",
		"Mint a token: the secret on the first line, its tokens-file entry (SHA-256 only) on the second; --add-to FILE appends the entry to a tokens file."},
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
	case "version", "--version":
		err = versionCmd(args[1:], stdout)
	case "help", "--help", "-h":
		// help COMMAND is COMMAND --help.
		if len(args) > 1 && args[1] != "version" && args[1] != "help" {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage())
	default:
		err = fmt.Errorf("%w: unknown command %q (allowed: %s)", errUsage, args[0], strings.Join(commandNames(), ", "))
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
		fmt.Fprintln(stderr, "paddle-monitor:", err)
		return 2
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
	_, err := fmt.Fprintln(stdout, "paddle-monitor version", version)
	return err
}

// env is a setting's environment variable: the flag wins over it.
type env struct {
	fs *pflag.FlagSet
}

// str defines a string flag whose default comes from the variable when set.
func (e env) str(name, variable, def, help string) *string {
	if v, ok := os.LookupEnv(variable); ok && v != "" {
		def = v
	}
	return e.fs.String(name, def, help+" (env "+variable+")")
}

// secret is str for a setting that may hold a password (the database
// URL): when the variable is unset, VARIABLE_FILE names a file holding the
// value (surrounding whitespace trimmed), so that it need not sit in the
// environment of every process or in a unit file.
func (e env) secret(name, variable, def, help string) (*string, error) {
	if v := os.Getenv(variable); v == "" {
		if path := os.Getenv(variable + "_FILE"); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("%s_FILE: %w", variable, err)
			}
			if def = strings.TrimSpace(string(b)); def == "" {
				return nil, fmt.Errorf("%s_FILE: %s is empty", variable, path)
			}
		}
	}
	return e.str(name, variable, def, help+" (or a file named by "+variable+"_FILE)"), nil
}

// duration is str for a Go duration; a bad value in the variable is an error
// naming it.
func (e env) duration(name, variable string, def time.Duration, help string) (*time.Duration, error) {
	if v, ok := os.LookupEnv(variable); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: not a positive Go duration (such as 168h)", variable, v)
		}
		def = d
	}
	return e.fs.Duration(name, def, help+" (env "+variable+")"), nil
}

// integer is str for a whole number; a bad value in the variable is an
// error naming it.
func (e env) integer(name, variable string, def int, help string) (*int, error) {
	if v, ok := os.LookupEnv(variable); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: not a positive whole number", variable, v)
		}
		def = n
	}
	return e.fs.Int(name, def, help+" (env "+variable+")"), nil
}

// boolean is str for a flag without a value (the variable: 1/true/0/false).
func (e env) boolean(name, variable, help string) (*bool, error) {
	def := false
	switch v := strings.ToLower(os.Getenv(variable)); v {
	case "":
	case "1", "true", "yes":
		def = true
	case "0", "false", "no":
	default:
		return nil, fmt.Errorf("%s=%q: must be 1 or 0", variable, v)
	}
	return e.fs.Bool(name, def, help+" (env "+variable+")"), nil
}

// newLogger builds the slog logger of --log-level and --log-format.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level / PADDLE_MONITOR_LOG %q: must be debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 && a.Value.Kind() == slog.KindTime {
			a.Value = slog.TimeValue(a.Value.Time().UTC())
		}
		return a
	}}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format / PADDLE_MONITOR_LOG_FORMAT %q: must be text or json", format)
}
