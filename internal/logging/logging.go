// Package logging is the entrypoint's logger (docs/contract.md, section 8,
// Logs): one line per event on stderr, text prefixed with
// "paddle-entrypoint: " so that its lines are told apart from the
// training's own output, or JSON with a "logger" field; times in UTC. It
// also takes over the standard library's "log" output, so that nothing
// unprefixed reaches stderr.
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

// logPrefix starts every text log line, so the entrypoint's lines are told
// apart from the training's own output on the same stderr.
const logPrefix = "paddle-entrypoint: "

// New returns the structured logger: one line per event on w, text (with
// logPrefix) or, when format is "json", JSON (with a "logger" field).
func New(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: utcTime}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(&prefixWriter{w: w, prefix: []byte(logPrefix)}, opts)
	}
	return slog.New(h).With("logger", "paddle-entrypoint")
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
