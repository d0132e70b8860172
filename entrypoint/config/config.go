// Package config builds the entrypoint's settings once, from its flags and
// its environment, through one table of package settings (its rules: the
// flag wins, a malformed flag is a usage error). The entrypoint's policy for
// a malformed environment variable is settings.Fallback: a warning and the
// default, because the environment is the task's and monitoring never
// breaks training.
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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/monitorurl"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
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
	// defaults, and settings the task tried to set that the policy file
	// locks; the caller logs them once its logger exists.
	Warnings []string

	// Policy is the policy file in force (nil: none, or PolicyErr);
	// PolicyErr, why the file found could not be used (built-in rules
	// apply, nothing is locked).
	Policy    *policy.Policy
	PolicyErr error
}

// Defaults.
const (
	DefaultLabelsFile     = "/var/run/paddle-task.labels"
	DefaultSpoolDir       = "/var/lib/paddle-entrypoint"
	DefaultRegisterBudget = 5 * time.Second
	DefaultOutageHold     = 60 * time.Second
	DefaultGPUTimeout     = 2 * time.Second
	DefaultSpoolMax       = drain.DefaultMax
	DefaultSpoolMaxAge    = drain.DefaultMaxAge
)

// DefaultSpoolPath is the per-UID spool file in DefaultSpoolDir.
func DefaultSpoolPath(uid int) string {
	return fmt.Sprintf("%s/spool-%d.db", DefaultSpoolDir, uid)
}

// ErrUsage marks errors that are the caller's: exit status 2.
var ErrUsage = settings.ErrUsage

// setting binds a flag to its environment variable.
type setting = settings.Entry[Config]

// table is every setting, in the order Build reads them.
var table = settings.Table[Config]{Policy: settings.Fallback,
	Entries: slices.Concat(taskSettings, exportSettings, nodeSettings, superviseSettings)}

// taskSettings are the task's labels, its monitor and its time budgets.
var taskSettings = []setting{
	{Flag: "labels-file", Var: "PADDLE_LABELS_FILE", Type: "string", Default: DefaultLabelsFile, Doc: "where to write the labels file",
		Parse: func(c *Config, s string) error { return nonEmpty(&c.LabelsFile, s) }},
	{Flag: "labels-mode", Var: "PADDLE_LABELS_MODE", Type: "string", Default: "warn", Doc: "warn (drop bad labels) or enforce (refuse to start); a policy file's mode wins",
		Parse: func(c *Config, s string) error { return oneOf(&c.LabelsMode, s, "warn", "enforce") }},
	{Flag: "policy", Var: "PADDLE_POLICY_FILE", Type: "string", Default: "", Doc: "label policy file, used only where " + "/etc/paddle-entrypoint/policy.json does not exist",
		Parse: func(c *Config, s string) error { c.PolicyFile = s; return nil }},
	{Flag: "monitor-url", Var: "PADDLE_MONITOR_URL", Type: "string", Default: "", Doc: "monitor API base URL; empty: no registration",
		Parse: func(c *Config, s string) error { return monitorURL(&c.MonitorURL, s) }},
	{Flag: "monitor-token-file", Var: "PADDLE_MONITOR_TOKEN_FILE", Type: "string", Default: "", Doc: "file holding the monitor's bearer token, re-read at every attempt",
		Parse: func(c *Config, s string) error { c.MonitorTokenFile = s; return nil }},
	{Flag: "monitor-ca-file", Var: "PADDLE_MONITOR_CA_FILE", Type: "string", Default: "", Doc: "PEM CA bundle added to the system roots for https",
		Parse: func(c *Config, s string) error { c.MonitorCAFile = s; return nil }},
	{Flag: "register-budget", Var: "PADDLE_REGISTER_BUDGET", Type: "duration", Default: DefaultRegisterBudget.String(), Doc: "time allowed for registration and the spool before exec",
		Parse: func(c *Config, s string) error { return duration(&c.RegisterBudget, s) }},
	{Flag: "outage-hold", Var: "PADDLE_OUTAGE_HOLD", Type: "duration", Default: "60s", Doc: "after a start found the monitor unreachable, starts within this time make one short attempt; 0: off",
		Parse: func(c *Config, s string) error { return duration(&c.OutageHold, s) }},
	{Flag: "gpu-timeout", Var: "PADDLE_GPU_TIMEOUT", Type: "duration", Default: DefaultGPUTimeout.String(), Doc: "time allowed for the GPU probe",
		Parse: func(c *Config, s string) error { return duration(&c.GPUTimeout, s) }},
}

// nodeSettings are the node's: the GPU probe, the spool, the logs.
var nodeSettings = []setting{
	{Flag: "gpu-probe", Var: "PADDLE_ENTRYPOINT_GPU_PROBE", Type: "string", Default: "", Doc: "GPU probe executable (default: paddle-gpu-probe beside this one)",
		Parse: func(c *Config, s string) error { c.GPUProbe = s; return nil }},
	{Flag: "spool-path", Var: "PADDLE_SPOOL_PATH", Type: "string", Default: "", Doc: "spool file, or off (default " + DefaultSpoolDir + "/spool-<uid>.db)",
		Parse: func(c *Config, s string) error { return spoolPath(&c.SpoolPath, s) }},
	{Flag: "spool-max", Var: "PADDLE_SPOOL_MAX", Type: "int", Default: strconv.Itoa(DefaultSpoolMax), Doc: "this task's own bound: its entry is not spooled when this many are pending (the node's bound, 10000, drops the oldest); on a spool command, the node's bound for every entry",
		Parse: func(c *Config, s string) error { return positive(&c.SpoolMax, s) }},
	{Flag: "spool-max-age", Var: "PADDLE_SPOOL_MAX_AGE", Type: "duration", Default: "720h", Doc: "this task's own entry moves to the dead letters this long after it was queued (the node's bound is 30 days); on a spool command, the node's bound for every entry",
		Parse: func(c *Config, s string) error { return duration(&c.SpoolMaxAge, s) }},
	{Flag: "log-level", Var: "PADDLE_ENTRYPOINT_LOG", Type: "string", Default: "info", Doc: "debug, info, warn or error",
		Parse: func(c *Config, s string) error { return level(&c.LogLevel, s) }},
	{Flag: "log-format", Var: "PADDLE_ENTRYPOINT_LOG_FORMAT", Type: "string", Default: "text", Doc: "text or json",
		Parse: func(c *Config, s string) error { return oneOf(&c.LogFormat, s, "text", "json") }},
}

// FlagSet holds the settings' flags; subcommands add their own to it.
type FlagSet struct{ *pflag.FlagSet }

// NewFlagSet returns a flag set with every setting. interspersed false stops
// parsing at the first non-flag argument, as run mode needs.
func NewFlagSet(name string, interspersed bool) *FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetInterspersed(interspersed)
	fs.SetOutput(io.Discard)
	table.Define(fs)
	fs.Bool(superviseFlag, false, "the same as --mode supervise")
	return &FlagSet{fs}
}

// Usage writes the flags' help to w.
func (f *FlagSet) Usage(w io.Writer) {
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// Build returns the configuration of a task's start (run mode, labels)
// from parsed flags and the environment, under the policy file
// (policy.SystemPath whenever it exists, else --policy or
// PADDLE_POLICY_FILE): its settings are the defaults, and a setting it
// locks takes its value (or the built-in default) whatever the flags and
// the environment say; each one the task tried to set is a warning, never
// an error (docs/contract.md, Settings a task cannot change). uid picks the
// default spool file.
func Build(flags *FlagSet, environ []string, uid int) (Config, error) {
	return buildUnder(flags, environ, uid, policy.SystemPath, true)
}

// BuildNode is Build for the node's own tools (the spool commands, run by
// an administrator with the flags they need): the policy file locks
// nothing there.
func BuildNode(flags *FlagSet, environ []string, uid int) (Config, error) {
	return buildUnder(flags, environ, uid, policy.SystemPath, false)
}

// buildUnder is Build with the system policy path (tests point it elsewhere);
// locked: whether the policy's settings apply.
func buildUnder(flags *FlagSet, environ []string, uid int, systemPath string, locked bool) (Config, error) {
	lookup := settings.Environ(environ)
	var fs *pflag.FlagSet
	if flags != nil {
		fs = flags.FlagSet
	}
	var locks settings.Locks
	var pol *policy.Policy
	var polErr error
	if locked {
		pol, polErr = loadPolicy(systemPath, policyFile(flags, lookup))
		locks = locksOf(pol)
	}
	var c Config
	warnings, err := table.ResolveLocked(&c, fs, lookup, locks)
	c.Warnings, c.Policy, c.PolicyErr = warnings, pol, polErr
	if err != nil {
		return c, err
	}
	if locks.Locked["PADDLE_ENTRYPOINT_MODE"] {
		if flags != nil && flags.Changed(superviseFlag) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("--%s: locked by the policy file %s (PADDLE_ENTRYPOINT_MODE); the task's value is ignored and %q applies",
				superviseFlag, locks.Source, c.Mode))
		}
	} else if err := superviseFlagWins(&c, flags); err != nil {
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
	if flags != nil && flags.Changed("monitor-url") && c.MonitorURL != "" && !locks.Locked["PADDLE_MONITOR_URL"] {
		if _, err := monitorurl.Parse(c.MonitorURL); err != nil {
			return c, fmt.Errorf("%w: --monitor-url: %v", ErrUsage, err)
		}
	}
	off := spoolOff(flags, lookup)
	if locks.Locked["PADDLE_SPOOL_PATH"] {
		off = strings.EqualFold(locks.Values["PADDLE_SPOOL_PATH"], "off")
	}
	if c.SpoolPath == "" && !off {
		c.SpoolPath = DefaultSpoolPath(uid)
	}
	return c, nil
}

// policyFile is the policy path the task names (--policy, else
// PADDLE_POLICY_FILE), used only where the system path does not exist.
func policyFile(flags *FlagSet, lookup func(string) (string, bool)) string {
	if flags != nil && flags.Changed("policy") {
		return flags.Lookup("policy").Value.String()
	}
	v, _ := lookup("PADDLE_POLICY_FILE")
	return v
}

// loadPolicy resolves and loads the policy file and holds its settings
// and locks to the table: a file that does not pass is an error, and no
// policy (the built-in rules apply; the caller logs the error).
func loadPolicy(systemPath, userPath string) (*policy.Policy, error) {
	pol, err := policy.Resolve(systemPath, userPath)
	if err == nil {
		err = pol.CheckSettings(known{})
	}
	if err != nil {
		return nil, err
	}
	return pol, nil
}

// locksOf are the policy's settings as the table's locks.
func locksOf(pol *policy.Policy) settings.Locks {
	if pol == nil {
		return settings.Locks{}
	}
	l := settings.Locks{Values: pol.Settings, Locked: map[string]bool{}, Source: pol.Source}
	for _, v := range pol.Locked {
		l.Locked[v] = true
	}
	return l
}

// known is the table as the policy file's settings are checked against it.
type known struct{}

func (known) Has(variable string) bool {
	_, ok := table.Entry(variable)
	return ok
}

func (known) Check(variable, value string) error {
	e, _ := table.Entry(variable)
	var scratch Config
	return e.Parse(&scratch, value)
}

// spoolOff reports whether the winning spool-path setting is "off".
func spoolOff(flags *FlagSet, lookup func(string) (string, bool)) bool {
	if flags != nil && flags.Changed("spool-path") {
		return strings.EqualFold(flags.Lookup("spool-path").Value.String(), "off")
	}
	v, _ := lookup("PADDLE_SPOOL_PATH")
	return strings.EqualFold(v, "off")
}

// Environment lists the environment variables of every setting.
func Environment() []string { return table.Vars() }

func nonEmpty(dst *string, s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*dst = s
	return nil
}

func oneOf(dst *string, s string, allowed ...string) error {
	return set(dst, s, func(s string) (string, error) { return settings.OneOf(s, allowed...) })
}

func duration(dst *time.Duration, s string) error { return set(dst, s, settings.Duration) }

func positive(dst *int, s string) error { return set(dst, s, settings.Positive) }

func onOff(dst *bool, s string) error { return set(dst, s, settings.Bool) }

// set stores parse(s) in dst when s parses.
func set[T any](dst *T, s string, parse func(string) (T, error)) error {
	v, err := parse(s)
	if err != nil {
		return err
	}
	*dst = v
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

// monitorURL keeps the monitor URL as given (less a trailing slash); Build
// checks a flag's (package monitorurl), the client one from the
// environment.
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
