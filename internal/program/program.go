// Package program is the shell the module's four programs share
// (paddle-entrypoint, paddle-monitor, paddle-node, paddle-gpu-probe): the
// exit status of a usage error, the usage error's line, the version line
// and the logger set up from a level and a format. A program's main parses
// and dispatches; what it prints around that comes from here, so that the
// programs read alike.
package program

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
)

// ExitUsage is the exit status of a usage error (an unknown flag, a bad
// value, a missing argument), the convention of Go's flag package and of
// docs/contract.md for the entrypoint, the monitor and the probe.
const ExitUsage = 2

// Program is one program as its shell sees it.
type Program struct {
	Name    string // "paddle-monitor"
	Version string // set at build time
	// UsageExit is the exit status of a usage error; 0: ExitUsage. The node
	// agent's contract (docs/node.md) gives 64, sysexits' EX_USAGE, which
	// its DaemonSet's restart policy and alerts were written for.
	UsageExit int
	// Log is how the logger marks its lines (logging.Style).
	Log logging.Style
}

// VersionLine is "NAME version X", as tini and dcgm-exporter print theirs.
func (p Program) VersionLine() string { return p.Name + " version " + p.Version }

// PrintVersion writes the version line on w.
func (p Program) PrintVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, p.VersionLine())
	return err
}

// Usage writes a usage error on w, "NAME: err", and the hint (the usage
// text, or where to find it) on the next line when there is one, and
// returns the usage exit status.
func (p Program) Usage(w io.Writer, err error, hint string) int {
	fmt.Fprintf(w, "%s: %v\n", p.Name, err)
	if hint != "" {
		fmt.Fprintln(w, strings.TrimSuffix(hint, "\n"))
	}
	return p.ExitUsage()
}

// ExitUsage is the program's usage exit status.
func (p Program) ExitUsage() int {
	if p.UsageExit == 0 {
		return ExitUsage
	}
	return p.UsageExit
}

// ErrLevel and ErrFormat mark a log level or format that is not one of
// the allowed ones.
var (
	ErrLevel  = errors.New("must be debug, info, warn or error")
	ErrFormat = errors.New("must be text or json")
)

// ParseLevel reads a log level: debug, info, warn or error (any case).
func ParseLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return 0, ErrLevel
	}
	return lv, nil
}

// Logger is the program's logger on w: level and format ("text" or
// "json") as the settings give them, times in UTC, lines marked as Log
// says.
func (p Program) Logger(w io.Writer, level slog.Level, format string) (*slog.Logger, error) {
	if format != "text" && format != "json" {
		return nil, ErrFormat
	}
	return logging.NewStyled(w, level, format, p.Log), nil
}
