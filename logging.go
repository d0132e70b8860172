package main

import (
	"bytes"
	"io"
	stdlog "log"
	"log/slog"
	"strings"
	"sync"

	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/sensitive"
)

// logPrefix starts every text log line, so the entrypoint's lines are told
// apart from the training's own output on the same stderr.
const logPrefix = "paddle-entrypoint: "

// newLogger returns the structured logger of section 8 of the contract: one
// line per event on w, text (with logPrefix) or JSON (with a "logger" field).
func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: utcTime}
	var h slog.Handler
	if cfg.LogFormat == "json" {
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

// reportSettings logs the environment settings that fell back to defaults.
func reportSettings(log *slog.Logger, cfg config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn("setting ignored", "problem", w)
	}
}

// labelAttrs returns the labels as one "labels" group, in file order: a
// label is the task's to name (PADDLE_LABEL_LEVEL), so it must not sit
// beside the record's own level, logger, msg and time, where a parser
// would keep the last of two equal keys. JSON nests the group; text writes
// labels.<key>.
func labelAttrs(s *labels.Set) slog.Attr {
	pairs := s.Pairs()
	attrs := make([]any, 0, len(pairs))
	for _, p := range pairs {
		attrs = append(attrs, slog.String(p.Key, p.Value))
	}
	return slog.Group("labels", attrs...)
}

// routeStdLog sends what other packages print through the standard "log"
// package (net/http's transport: "Unsolicited response received on idle
// HTTP channel ...") to log as one warning per line, URL userinfo
// redacted, so nothing unprefixed or un-JSON reaches stderr. The standard
// logger is the process's; this is its one configuration.
func routeStdLog(log *slog.Logger) {
	stdlog.SetFlags(0)
	stdlog.SetOutput(stdlogWriter{log})
}

type stdlogWriter struct{ log *slog.Logger }

func (w stdlogWriter) Write(b []byte) (int, error) {
	text := sensitive.RedactURLs(strings.TrimRight(string(b), "\n"))
	w.log.Warn("from Go's standard library", "text", text)
	return len(b), nil
}
