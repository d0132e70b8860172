package program

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
)

// TestUsage: the usage line, the hint and the exit status of each program.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		p        Program
		hint     string
		want     string
		wantExit int
	}{
		{Program{Name: "paddle-entrypoint"}, "usage: paddle-entrypoint [flags] COMMAND\n", "paddle-entrypoint: bad flag\nusage: paddle-entrypoint [flags] COMMAND\n", 2},
		{Program{Name: "paddle-monitor"}, "", "paddle-monitor: bad flag\n", 2},
		{Program{Name: "paddle-node", UsageExit: 64}, "Run paddle-node --help for the settings.", "paddle-node: bad flag\nRun paddle-node --help for the settings.\n", 64},
		{Program{Name: "paddle-gpu-probe sample"}, "usage: x", "paddle-gpu-probe sample: bad flag\nusage: x\n", 2},
	} {
		var b bytes.Buffer
		if code := c.p.Usage(&b, errors.New("bad flag"), c.hint); code != c.wantExit || b.String() != c.want {
			t.Errorf("%s: Usage wrote %q, exit %d; want %q, exit %d", c.p.Name, b.String(), code, c.want, c.wantExit)
		}
	}
}

// TestVersionLine: "NAME version X".
func TestVersionLine(t *testing.T) {
	var b bytes.Buffer
	if err := (Program{Name: "paddle-node", Version: "1.2.3"}).PrintVersion(&b); err != nil || b.String() != "paddle-node version 1.2.3\n" {
		t.Errorf("PrintVersion wrote %q, %v", b.String(), err)
	}
}

// TestLogger: level, format and marks; a bad level or format is refused.
func TestLogger(t *testing.T) {
	for _, c := range []struct {
		name, format string
		style        logging.Style
		want         []string
		not          []string
	}{
		{"monitor text", "text", logging.Style{}, []string{"level=WARN msg=hello k=v"}, []string{"logger=", "paddle"}},
		{"node text", "text", logging.Style{Name: "paddle-node"}, []string{"logger=paddle-node", "msg=hello"}, []string{"paddle-node: "}},
		{"entrypoint text", "text", logging.Entrypoint, []string{"paddle-entrypoint: time=", "logger=paddle-entrypoint"}, nil},
		{"entrypoint json", "json", logging.Entrypoint, []string{`"logger":"paddle-entrypoint"`, `"msg":"hello"`}, []string{"paddle-entrypoint: "}},
	} {
		var b bytes.Buffer
		lv, err := ParseLevel("WARN")
		if err != nil {
			t.Fatal(err)
		}
		log, err := (Program{Name: "x", Log: c.style}).Logger(&b, lv, c.format)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("dropped")
		log.Warn("hello", "k", "v")
		out := b.String()
		if strings.Count(out, "\n") != 1 || strings.Contains(out, "dropped") {
			t.Errorf("%s: want the warning only, got %q", c.name, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q lacks %q", c.name, out, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("%s: %q holds %q", c.name, out, n)
			}
		}
	}
	if _, err := ParseLevel("loud"); !errors.Is(err, ErrLevel) {
		t.Errorf("ParseLevel(loud) = %v", err)
	}
	if _, err := (Program{}).Logger(&bytes.Buffer{}, 0, "xml"); !errors.Is(err, ErrFormat) {
		t.Errorf("Logger(xml) = %v", err)
	}
}
