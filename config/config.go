// Package config builds the entrypoint's settings once, from its flags and
// its environment. Every setting has a flag and an environment variable; the
// flag wins. A malformed flag is a usage error; a malformed environment
// variable is reported as a warning and its default used, because the
// environment is the task's and monitoring never breaks training.
//
// No setting takes a name that Paddle's own launcher reads (PADDLE_LOG_DIR,
// PADDLE_TRAINER_*, ...), and none starts with PADDLE_LABEL_, so settings
// never count as labels.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/spf13/pflag"
)

// Config is every setting of one invocation.
type Config struct {
	LabelsFile       string
	LabelsMode       string // "warn" or "enforce", before a policy file's mode
	PolicyFile       string // from --policy or PADDLE_POLICY_FILE
	MonitorURL       string // "" disables registration
	MonitorTokenFile string
	MonitorCAFile    string
	RegisterBudget   time.Duration
	OutageHold       time.Duration // 0: no outage memory
	GPUTimeout       time.Duration
	GPUProbe         string        // the probe executable; "" means beside our own
	SpoolPath        string        // "" when the spool is off
	SpoolMax         int           // the task's own bound on what it adds
	SpoolMaxAge      time.Duration // the task's own bound on what it adds
	// SpoolNodeMax and SpoolNodeMaxAge bound every entry of the spool
	// file, whoever added it: the defaults, or the flags of a spool
	// subcommand (the node's drainer, run by the administrator); never a
	// task's environment.
	SpoolNodeMax    int
	SpoolNodeMaxAge time.Duration
	LogLevel        slog.Level
	LogFormat       string // "text" or "json"

	// Task identity exports and the quality gate (docs/pipelines.md).
	OTel        bool    // merge OTEL_RESOURCE_ATTRIBUTES
	TextfileDir string  // "" when off
	GPUShared   bool    // PADDLE_GPU_SHARED, or implied by GPUShare < 1
	GPUShare    float64 // PADDLE_GPU_SHARE: each whole GPU's share, in (0, 1]
	Gate        string  // the expression as given; "" when none
	GateFile    string
	GateExit    int

	// Supervise mode (docs/supervise.md).
	Mode           Mode
	SignalGroup    bool          // forward signals to the command's process group
	CompleteBudget time.Duration // from the command's end to the supervisor's exit
	GPUSample      time.Duration // sampling interval; 0: off
	Heartbeat      time.Duration // 0: off

	// Warnings are malformed environment settings that fell back to their
	// defaults; the caller logs them once its logger exists.
	Warnings []string
}

// Defaults.
const (
	DefaultLabelsFile     = "/var/run/paddle-task.labels"
	DefaultSpoolDir       = "/var/lib/paddle-entrypoint"
	DefaultRegisterBudget = 5 * time.Second
	DefaultOutageHold     = 60 * time.Second
	DefaultGPUTimeout     = 2 * time.Second
	DefaultSpoolMax       = 10000
	DefaultSpoolMaxAge    = 30 * 24 * time.Hour
)

// DefaultSpoolPath is the per-UID spool file in DefaultSpoolDir.
func DefaultSpoolPath(uid int) string {
	return fmt.Sprintf("%s/spool-%d.db", DefaultSpoolDir, uid)
}

// ErrUsage marks errors that are the caller's: exit status 2.
var ErrUsage = errors.New("usage error")

// setting binds a flag to its environment variable.
type setting struct {
	flag, env, def, help string
	parse                func(c *Config, s string) error
}

var settings = []setting{
	{"labels-file", "PADDLE_LABELS_FILE", DefaultLabelsFile, "where to write the labels file",
		func(c *Config, s string) error { return nonEmpty(&c.LabelsFile, s) }},
	{"labels-mode", "PADDLE_LABELS_MODE", "warn", "warn (drop bad labels) or enforce (refuse to start); a policy file's mode wins",
		func(c *Config, s string) error { return oneOf(&c.LabelsMode, s, "warn", "enforce") }},
	{"policy", "PADDLE_POLICY_FILE", "", "label policy file, used only where " + "/etc/paddle-entrypoint/policy.json does not exist",
		func(c *Config, s string) error { c.PolicyFile = s; return nil }},
	{"monitor-url", "PADDLE_MONITOR_URL", "", "monitor API base URL; empty: no registration",
		func(c *Config, s string) error { return monitorURL(&c.MonitorURL, s) }},
	{"monitor-token-file", "PADDLE_MONITOR_TOKEN_FILE", "", "file holding the monitor's bearer token, re-read at every attempt",
		func(c *Config, s string) error { c.MonitorTokenFile = s; return nil }},
	{"monitor-ca-file", "PADDLE_MONITOR_CA_FILE", "", "PEM CA bundle added to the system roots for https",
		func(c *Config, s string) error { c.MonitorCAFile = s; return nil }},
	{"register-budget", "PADDLE_REGISTER_BUDGET", DefaultRegisterBudget.String(), "time allowed for registration and the spool before exec",
		func(c *Config, s string) error { return duration(&c.RegisterBudget, s) }},
	{"outage-hold", "PADDLE_OUTAGE_HOLD", "60s", "after a start found the monitor unreachable, starts within this time make one short attempt; 0: off",
		func(c *Config, s string) error { return duration(&c.OutageHold, s) }},
	{"gpu-timeout", "PADDLE_GPU_TIMEOUT", DefaultGPUTimeout.String(), "time allowed for the GPU probe",
		func(c *Config, s string) error { return duration(&c.GPUTimeout, s) }},
	exportSettings[0], exportSettings[1], exportSettings[2], exportSettings[3], exportSettings[4], exportSettings[5], exportSettings[6],
	{"gpu-probe", "PADDLE_ENTRYPOINT_GPU_PROBE", "", "GPU probe executable (default: paddle-gpu-probe beside this one)",
		func(c *Config, s string) error { c.GPUProbe = s; return nil }},
	{"spool-path", "PADDLE_SPOOL_PATH", "", "spool file, or off (default " + DefaultSpoolDir + "/spool-<uid>.db)",
		func(c *Config, s string) error { return spoolPath(&c.SpoolPath, s) }},
	{"spool-max", "PADDLE_SPOOL_MAX", strconv.Itoa(DefaultSpoolMax), "this task's own bound: its entry is not spooled when this many are pending (the node's bound, 10000, drops the oldest); on a spool command, the node's bound for every entry",
		func(c *Config, s string) error { return positive(&c.SpoolMax, s) }},
	{"spool-max-age", "PADDLE_SPOOL_MAX_AGE", "720h", "this task's own entry moves to the dead letters this long after it was queued (the node's bound is 30 days); on a spool command, the node's bound for every entry",
		func(c *Config, s string) error { return duration(&c.SpoolMaxAge, s) }},
	{"log-level", "PADDLE_ENTRYPOINT_LOG", "info", "debug, info, warn or error",
		func(c *Config, s string) error { return level(&c.LogLevel, s) }},
	{"log-format", "PADDLE_ENTRYPOINT_LOG_FORMAT", "text", "text or json",
		func(c *Config, s string) error { return oneOf(&c.LogFormat, s, "text", "json") }},
	superviseSettings[0], superviseSettings[1], superviseSettings[2], superviseSettings[3], superviseSettings[4],
}

// FlagSet holds the settings' flags; subcommands add their own to it.
type FlagSet struct {
	*pflag.FlagSet
	values map[string]*value
}

// value is a setting's flag. It keeps the text as given, for Build to parse
// after the environment (so that the flag wins), and names the kind of
// value the setting takes, for --help.
type value struct{ text, kind string }

func (v *value) String() string     { return v.text }
func (v *value) Set(s string) error { v.text = s; return nil }
func (v *value) Type() string       { return v.kind }

// kind names what a setting accepts, found by asking its own parser (so a
// setting added to the table needs no second declaration): "on|off" when
// it takes on and off (a switch, which takes 1 and 0 too), "duration" when
// it takes 1s but not 1, "number" when it takes 1 and 0.5 but not 1s, "int"
// when it takes 1 but not 1s or 0.5, else "string".
func (s setting) kind() string {
	var c Config
	if s.parse(&c, "on") == nil && s.parse(&c, "off") == nil && s.parse(&c, "maybe") != nil {
		return "on|off"
	}
	dur, num := s.parse(&c, "1s") == nil, s.parse(&c, "1") == nil
	switch {
	case dur && !num:
		return "duration"
	case num && !dur && s.parse(&c, "0.5") == nil:
		return "number"
	case num && !dur:
		return "int"
	}
	return "string"
}

// NewFlagSet returns a flag set with every setting. interspersed false stops
// parsing at the first non-flag argument, as run mode needs.
func NewFlagSet(name string, interspersed bool) *FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetInterspersed(interspersed)
	fs.SetOutput(io.Discard)
	f := &FlagSet{FlagSet: fs, values: map[string]*value{}}
	for _, s := range settings {
		v := &value{text: s.def, kind: s.kind()}
		fs.Var(v, s.flag, fmt.Sprintf("%s (env %s)", s.help, s.env))
		v.text = ""
		f.values[s.flag] = v
		if v, ok := flagAlone[s.flag]; ok {
			fs.Lookup(s.flag).NoOptDefVal = v
		}
	}
	fs.Bool(superviseFlag, false, "the same as --mode supervise")
	return f
}

// Usage writes the flags' help to w.
func (f *FlagSet) Usage(w io.Writer) {
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// Build returns the configuration from parsed flags and the environment.
// uid picks the default spool file.
func Build(flags *FlagSet, environ []string, uid int) (Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[k]; !dup {
				env[k] = v
			}
		}
	}
	var c Config
	for _, s := range settings {
		if err := s.parse(&c, s.def); err != nil {
			panic("config: bad default for " + s.flag + ": " + err.Error())
		}
		if v, ok := env[s.env]; ok && v != "" {
			if err := s.parse(&c, v); err != nil {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %v; using the default %q", s.env, err, s.def))
				s.parse(&c, s.def)
			}
		}
		if flags != nil && flags.Changed(s.flag) {
			if err := s.parse(&c, flags.values[s.flag].text); err != nil {
				return c, fmt.Errorf("%w: --%s: %v", ErrUsage, s.flag, err)
			}
		}
	}
	if err := superviseFlagWins(&c, flags); err != nil {
		return c, err
	}
	if c.GPUShare < 1 {
		// A fraction of a GPU is a shared GPU, whatever PADDLE_GPU_SHARED says.
		c.GPUShared = true
	}
	c.SpoolNodeMax, c.SpoolNodeMaxAge = DefaultSpoolMax, DefaultSpoolMaxAge
	// A monitor URL that can never work is the caller's mistake when given
	// as a flag; from the environment it is kept, so that the client warns
	// once and spools every registration at once (nothing is lost).
	if flags != nil && flags.Changed("monitor-url") && c.MonitorURL != "" {
		if _, err := register.ParseBase(c.MonitorURL); err != nil {
			return c, fmt.Errorf("%w: --monitor-url: %v", ErrUsage, err)
		}
	}
	if c.SpoolPath == "" && !spoolOff(flags, env) {
		c.SpoolPath = DefaultSpoolPath(uid)
	}
	return c, nil
}

// spoolOff reports whether the winning spool-path setting is "off".
func spoolOff(flags *FlagSet, env map[string]string) bool {
	if flags != nil && flags.Changed("spool-path") {
		return strings.EqualFold(flags.values["spool-path"].text, "off")
	}
	return strings.EqualFold(env["PADDLE_SPOOL_PATH"], "off")
}

// Environment lists the environment variables of every setting.
func Environment() []string {
	names := make([]string, len(settings))
	for i, s := range settings {
		names[i] = s.env
	}
	return names
}

func nonEmpty(dst *string, s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*dst = s
	return nil
}

func oneOf(dst *string, s string, allowed ...string) error {
	low := strings.ToLower(s)
	for _, a := range allowed {
		if low == a {
			*dst = a
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", s, strings.Join(allowed, ", "))
}

func duration(dst *time.Duration, s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a non-negative duration such as 5s", s)
	}
	*dst = d
	return nil
}

func positive(dst *int, s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a positive integer", s)
	}
	*dst = n
	return nil
}

func level(dst *slog.Level, s string) error {
	var l slog.Level
	switch strings.ToLower(s) {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		return fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	*dst = l
	return nil
}

// monitorURL keeps the monitor URL as given (less a trailing slash); the
// register package checks it (register.ParseBase).
func monitorURL(dst *string, s string) error {
	*dst = strings.TrimRight(s, "/")
	return nil
}

func spoolPath(dst *string, s string) error {
	if strings.EqualFold(s, "off") {
		*dst = ""
		return nil
	}
	*dst = s
	return nil
}
