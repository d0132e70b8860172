package config

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func build(t *testing.T, args []string, env ...string) (Config, error) {
	t.Helper()
	fs := NewFlagSet("test", false)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return Build(fs, env, 1000)
}

func TestDefaults(t *testing.T) {
	c, err := build(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		LabelsFile: DefaultLabelsFile, LabelsMode: "warn", RegisterBudget: 5 * time.Second,
		GPUTimeout: 2 * time.Second, SpoolPath: "/var/lib/paddle-entrypoint/spool-1000.db",
		SpoolMax: 10000, SpoolMaxAge: 30 * 24 * time.Hour, LogLevel: slog.LevelInfo, LogFormat: "text",
	}
	if c.LabelsFile != want.LabelsFile || c.LabelsMode != want.LabelsMode || c.RegisterBudget != want.RegisterBudget ||
		c.GPUTimeout != want.GPUTimeout || c.SpoolPath != want.SpoolPath || c.SpoolMax != want.SpoolMax ||
		c.SpoolMaxAge != want.SpoolMaxAge || c.LogLevel != want.LogLevel || c.LogFormat != want.LogFormat ||
		c.MonitorURL != "" || len(c.Warnings) != 0 {
		t.Errorf("defaults = %+v", c)
	}
}

func TestEnvironmentAndFlags(t *testing.T) {
	env := []string{
		"PADDLE_LABELS_FILE=/env/labels", "PADDLE_REGISTER_BUDGET=3s", "PADDLE_MONITOR_URL=http://m:8080/",
		"PADDLE_SPOOL_PATH=off", "PADDLE_ENTRYPOINT_LOG=debug", "PADDLE_ENTRYPOINT_LOG_FORMAT=JSON",
		"PADDLE_LABELS_MODE=enforce", "PADDLE_GPU_TIMEOUT=500ms", "PADDLE_SPOOL_MAX=7",
	}
	c, err := build(t, []string{"--labels-file", "/flag/labels", "--register-budget=1s"}, env...)
	if err != nil {
		t.Fatal(err)
	}
	if c.LabelsFile != "/flag/labels" || c.RegisterBudget != time.Second {
		t.Errorf("flags did not win: %+v", c)
	}
	if c.MonitorURL != "http://m:8080" || c.SpoolPath != "" || c.LogLevel != slog.LevelDebug ||
		c.LogFormat != "json" || c.LabelsMode != "enforce" || c.GPUTimeout != 500*time.Millisecond || c.SpoolMax != 7 {
		t.Errorf("environment not applied: %+v", c)
	}
	c, _ = build(t, []string{"--spool-path", "/flag/spool.db"}, "PADDLE_SPOOL_PATH=off")
	if c.SpoolPath != "/flag/spool.db" {
		t.Errorf("--spool-path did not win over PADDLE_SPOOL_PATH=off: %q", c.SpoolPath)
	}
	c, _ = build(t, []string{"--spool-path", "off"}, "PADDLE_SPOOL_PATH=/env/spool.db")
	if c.SpoolPath != "" {
		t.Errorf("--spool-path off did not win: %q", c.SpoolPath)
	}
}

func TestMalformedEnvironmentFallsBack(t *testing.T) {
	tests := []struct {
		env   string
		check func(Config) bool
	}{
		{"PADDLE_REGISTER_BUDGET=soon", func(c Config) bool { return c.RegisterBudget == DefaultRegisterBudget }},
		{"PADDLE_REGISTER_BUDGET=-1s", func(c Config) bool { return c.RegisterBudget == DefaultRegisterBudget }},
		{"PADDLE_GPU_TIMEOUT=2", func(c Config) bool { return c.GPUTimeout == DefaultGPUTimeout }},
		{"PADDLE_SPOOL_MAX=0", func(c Config) bool { return c.SpoolMax == DefaultSpoolMax }},
		{"PADDLE_LABELS_MODE=strict", func(c Config) bool { return c.LabelsMode == "warn" }},
		{"PADDLE_ENTRYPOINT_LOG=loud", func(c Config) bool { return c.LogLevel == slog.LevelInfo }},
		{"PADDLE_ENTRYPOINT_LOG_FORMAT=xml", func(c Config) bool { return c.LogFormat == "text" }},
		{"PADDLE_GPU_SHARE=0", func(c Config) bool { return c.GPUShare == 1 && !c.GPUShared }},
		{"PADDLE_GPU_SHARE=1.5", func(c Config) bool { return c.GPUShare == 1 && !c.GPUShared }},
		{"PADDLE_GPU_SHARE=-0.25", func(c Config) bool { return c.GPUShare == 1 }},
		{"PADDLE_GPU_SHARE=quarter", func(c Config) bool { return c.GPUShare == 1 }},
		{"PADDLE_GPU_SHARE=NaN", func(c Config) bool { return c.GPUShare == 1 }},
		{"PADDLE_GPU_SHARE=0x1p-2", func(c Config) bool { return c.GPUShare == 1 }},
		{"PADDLE_GPU_SHARE=25%", func(c Config) bool { return c.GPUShare == 1 }},
	}
	for _, tt := range tests {
		c, err := build(t, nil, tt.env)
		if err != nil {
			t.Errorf("%s: error %v, want a warning", tt.env, err)
			continue
		}
		name, _, _ := strings.Cut(tt.env, "=")
		if !tt.check(c) || len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], name+": ") {
			t.Errorf("%s: config %+v, warnings %q", tt.env, c, c.Warnings)
		}
	}
}

func TestMalformedFlagIsUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"--register-budget", "soon"},
		{"--labels-mode", "strict"},
		{"--spool-max", "-3"},
		{"--monitor-url", "ftp://x"},
		{"--monitor-url", "http://:8080"},
		{"--monitor-url", "http://m:0"},
		{"--outage-hold", "a minute"},
		{"--log-format", "xml"},
	} {
		if _, err := build(t, args); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: error %v, want a usage error naming the flag", args, err)
		}
	}
	fs := NewFlagSet("test", false)
	if err := fs.Parse([]string{"--no-such-flag"}); err == nil {
		t.Error("unknown flag accepted")
	}
}

// A monitor URL from the environment that can never work is kept, not
// dropped: the client refuses it with one warning and every registration is
// spooled at once, for a process with a good URL to send (docs/contract.md).
func TestUnworkableMonitorURLFromEnvironmentIsKept(t *testing.T) {
	for _, raw := range []string{"monitor:8080", "ftp://m", "http://:8080", "http://m:70000"} {
		c, err := build(t, nil, "PADDLE_MONITOR_URL="+raw)
		if err != nil || c.MonitorURL != raw || len(c.Warnings) != 0 {
			t.Errorf("%s: url %q, err %v, warnings %q; want it kept as given", raw, c.MonitorURL, err, c.Warnings)
		}
	}
}

// --help names each flag's type as the setting parses it and its default
// once.
func TestHelpShowsTypesAndDefaultsOnce(t *testing.T) {
	var b strings.Builder
	NewFlagSet("test", false).Usage(&b)
	help := b.String()
	for _, want := range []string{
		"--register-budget duration ", "--gpu-timeout duration ", "--outage-hold duration ",
		"--spool-max-age duration ", "--spool-max int ", "--labels-file string ", "--monitor-url string ",
		"(default 5s)", "(default 60s)", "(default 10000)", `(default "warn")`,
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if strings.Count(line, "default") > 1 {
			t.Errorf("default shown twice: %q", line)
		}
	}
	if strings.Contains(help, `(default "")`) || strings.Contains(help, "default \"5s\"") {
		t.Errorf("help shows an empty or quoted duration default:\n%s", help)
	}
}

func TestParsingStopsAtFirstNonFlag(t *testing.T) {
	fs := NewFlagSet("test", false)
	if err := fs.Parse([]string{"--gpu-timeout", "1s", "python", "train.py", "--lr", "0.1"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fs.Args(), " "); got != "python train.py --lr 0.1" {
		t.Errorf("args = %q", got)
	}
}

func TestNoSettingTakesPaddlesOwnNames(t *testing.T) {
	paddle := []string{"PADDLE_JOB_ID", "PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_RANK", "PADDLE_DEVICES",
		"PADDLE_LOG_DIR", "PADDLE_RUN_MODE", "PADDLE_MAX_RESTART", "PADDLE_IPS", "PADDLE_START_PORT"}
	for _, name := range Environment() {
		for _, p := range paddle {
			if name == p {
				t.Errorf("setting %s takes a name Paddle's launcher reads", name)
			}
		}
		if strings.HasPrefix(name, "PADDLE_ELASTIC_") || strings.HasPrefix(name, "PADDLE_TRAINER") ||
			strings.HasPrefix(name, "PADDLE_LABEL_") {
			t.Errorf("setting %s takes a reserved prefix", name)
		}
	}
}

func TestGPUShare(t *testing.T) {
	tests := []struct {
		env    []string
		share  float64
		shared bool
	}{
		{nil, 1, false},
		{[]string{"PADDLE_GPU_SHARE=0.25"}, 0.25, true},
		{[]string{"PADDLE_GPU_SHARE=1"}, 1, false},
		{[]string{"PADDLE_GPU_SHARE=1.0"}, 1, false},
		{[]string{"PADDLE_GPU_SHARE=.5"}, 0.5, true},
		// Below 1 wins over PADDLE_GPU_SHARED=0.
		{[]string{"PADDLE_GPU_SHARE=0.5", "PADDLE_GPU_SHARED=0"}, 0.5, true},
		{[]string{"PADDLE_GPU_SHARE=1", "PADDLE_GPU_SHARED=1"}, 1, true},
	}
	for _, tt := range tests {
		c, err := build(t, nil, tt.env...)
		if err != nil || len(c.Warnings) != 0 || c.GPUShare != tt.share || c.GPUShared != tt.shared {
			t.Errorf("%v: share %v shared %v (err %v, warnings %q), want %v %v", tt.env, c.GPUShare, c.GPUShared, err, c.Warnings, tt.share, tt.shared)
		}
	}
	c, err := build(t, []string{"--gpu-share", "0.125"})
	if err != nil || c.GPUShare != 0.125 || !c.GPUShared {
		t.Errorf("--gpu-share 0.125: %v %v %v", c.GPUShare, c.GPUShared, err)
	}
	if _, err := build(t, []string{"--gpu-share", "2"}); err == nil || !strings.Contains(err.Error(), "--gpu-share") {
		t.Errorf("--gpu-share 2: %v, want a usage error", err)
	}
	// Below 0.01 the monitor refuses the registration: a bad value.
	if _, err := build(t, []string{"--gpu-share", "0.001"}); err == nil || !strings.Contains(err.Error(), `"0.001" is not a decimal number from 0.01 to 1`) {
		t.Errorf("--gpu-share 0.001: %v, want a usage error", err)
	}
	if c, err := build(t, nil, "PADDLE_GPU_SHARE=0.001"); err != nil || c.GPUShare != 1 || len(c.Warnings) != 1 {
		t.Errorf("PADDLE_GPU_SHARE=0.001: share %v, warnings %q, %v; want 1 and a warning", c.GPUShare, c.Warnings, err)
	}
}
