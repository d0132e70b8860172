// Package logging is the one logger set-up of the module's programs
// (NewStyled: a level, a format, times in UTC, a program's marks) and the
// entrypoint's logger (docs/contract.md, section 8, Logs): one line per
// event on stderr, text prefixed with "paddle-entrypoint: " so that its
// lines are told apart from the training's own output, or JSON with a
// "logger" field. It also takes over the standard library's "log" output,
// so that nothing unprefixed reaches stderr.
package logging

import (
	"bytes"
	"io"
	stdlog "log"
	"log/slog"
	"strings"
	"sync"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/monitorurl"
)

// Style is how a program marks its log lines: Name is the "logger"
// attribute of every line ("" for none), and Prefix, with Name, starts
// every text line with "NAME: " (the entrypoint's, whose lines share
// stderr with the training's own output).
type Style struct {
	Name   string
	Prefix bool
}

// Entrypoint is the entrypoint's style: "paddle-entrypoint: " before every
// text line, and a "logger" field.
var Entrypoint = Style{Name: "paddle-entrypoint", Prefix: true}

// New returns the entrypoint's structured logger: one line per event on
// w, text (with its prefix) or, when format is "json", JSON (with a
// "logger" field).
func New(w io.Writer, level slog.Level, format string) *slog.Logger {
	return NewStyled(w, level, format, Entrypoint)
}

// NewStyled is the one logger set-up of every program: one line per event
// on w at level and above, text or, when format is "json", JSON, times in
// UTC, marked as st says.
func NewStyled(w io.Writer, level slog.Level, format string, st Style) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: utcTime}
	var h slog.Handler
	switch {
	case format == "json":
		h = slog.NewJSONHandler(w, opts)
	case st.Prefix && st.Name != "":
		h = slog.NewTextHandler(&prefixWriter{w: w, prefix: []byte(st.Name + ": ")}, opts)
	default:
		h = slog.NewTextHandler(w, opts)
	}
	l := slog.New(h)
	if st.Name != "" {
		l = l.With("logger", st.Name)
	}
	return l
}

// utcTime writes record times in UTC: unambiguous across nodes, and it spares
// every start the loading of /etc/localtime.
func utcTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 && a.Value.Kind() == slog.KindTime {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}

// prefixWriter prefixes each Write, which slog's handlers make once per record.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	buf    bytes.Buffer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Reset()
	p.buf.Write(p.prefix)
	p.buf.Write(b)
	if _, err := p.w.Write(p.buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Settings logs the environment settings that fell back to defaults
// (config.Config's Warnings).
func Settings(log *slog.Logger, warnings []string) {
	for _, w := range warnings {
		log.Warn("setting ignored", "problem", w)
	}
}

// RouteStdLog sends what other packages print through the standard "log"
// package (net/http's transport: "Unsolicited response received on idle
// HTTP channel ...") to log as one warning per line, URL userinfo
// redacted, so nothing unprefixed or un-JSON reaches stderr. The standard
// logger is the process's; this is its one configuration.
func RouteStdLog(log *slog.Logger) {
	stdlog.SetFlags(0)
	stdlog.SetOutput(stdlogWriter{log})
}

type stdlogWriter struct{ log *slog.Logger }

func (w stdlogWriter) Write(b []byte) (int, error) {
	text := monitorurl.RedactURLs(strings.TrimRight(string(b), "\n"))
	w.log.Warn("from Go's standard library", "text", text)
	return len(b), nil
}
