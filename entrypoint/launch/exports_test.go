package launch

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

// finishTask decides the supervisor's exit status from the command's and
// the gate; the black-box tests of supervise mode run it through the
// binary.
func TestFinishTask(t *testing.T) {
	dir := t.TempDir()
	metrics := filepath.Join(dir, "metrics.json")
	os.WriteFile(metrics, []byte(`{"accuracy": 0.93, "loss": 0.4}`), 0o644)
	g, err := gate.Parse("accuracy>=0.95")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{GateFile: metrics, GateExit: 3, TextfileDir: dir}
	set := &labels.Set{TaskID: "t-1"}
	tests := []struct {
		name      string
		g         *gate.Gate
		file      string
		code      int
		want      int
		verdict   string // "" for none
		reason    string
		nMetrics  int
		logSubstr string
	}{
		{"no gate", nil, metrics, 0, 0, "", "", 0, ""},
		{"no gate, failed command", nil, metrics, 7, 7, "", "", 0, ""},
		{"gate fails", g, metrics, 0, 3, "false", "accuracy=0.93 is not >= 0.95", 2, "quality gate failed"},
		{"command failed: not gated", g, metrics, 1, 1, "", "", 0, "not evaluated"},
		{"killed: not gated", g, metrics, 137, 137, "", "", 0, "not evaluated"},
		{"file missing", g, filepath.Join(dir, "none.json"), 0, 3, "false", "no such file", 0, "quality gate failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := cfg
			c.GateFile = tt.file
			status, verdict, m := finishTask(c, tt.g, set, false, tt.code, newLogger(&logs, c))
			if status != tt.want {
				t.Errorf("status %d, want %d", status, tt.want)
			}
			if (verdict == nil) != (tt.verdict == "") {
				t.Fatalf("verdict %+v, want %q", verdict, tt.verdict)
			}
			if verdict != nil && (verdict.Passed || !strings.Contains(verdict.Reason, tt.reason) || verdict.Expr != "accuracy>=0.95") {
				t.Errorf("verdict %+v, want failed with %q", verdict, tt.reason)
			}
			if len(m) != tt.nMetrics {
				t.Errorf("metrics %v", m)
			}
			if !strings.Contains(logs.String(), tt.logSubstr) {
				t.Errorf("log %q lacks %q", logs.String(), tt.logSubstr)
			}
		})
	}

	os.WriteFile(metrics, []byte(`{"accuracy": 0.96}`), 0o644)
	var logs bytes.Buffer
	status, verdict, m := finishTask(cfg, g, set, false, 0, newLogger(&logs, cfg))
	if status != 0 || verdict == nil || !verdict.Passed || verdict.Reason != "accuracy=0.96 >= 0.95" || m["accuracy"] != 0.96 {
		t.Errorf("passing gate: %d %+v %v", status, verdict, m)
	}

	// The textfile lives as long as the command.
	prom := filepath.Join(dir, "paddle-task-t-1.prom")
	os.WriteFile(prom, []byte("x 1\n"), 0o644)
	finishTask(cfg, nil, set, true, 0, newLogger(&logs, cfg))
	if _, err := os.Stat(prom); !os.IsNotExist(err) {
		t.Errorf("textfile not removed: %v", err)
	}
}

// finishTask and newLogger take the arguments the functions of the same
// names took in package main, where this test was written.
func finishTask(cfg config.Config, g *gate.Gate, set *labels.Set, written bool, code int, log *slog.Logger) (int, *gate.Result, map[string]float64) {
	return (&Task{cfg: &cfg, set: set, log: log}).finishTask(g, written, code)
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	return logging.New(w, cfg.LogLevel, cfg.LogFormat)
}
