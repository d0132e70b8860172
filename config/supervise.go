package config

import (
	"fmt"
	"strings"
	"time"
)

// Mode is how the command runs: exec'd in place of the entrypoint (the
// binary's default, the shell script's behaviour) or supervised as its child.
type Mode string

// Modes.
const (
	ModeExec      Mode = "exec"
	ModeSupervise Mode = "supervise"
)

// Defaults of supervise mode.
const (
	DefaultCompleteBudget = 3 * time.Second
	DefaultGPUSample      = 10 * time.Second
)

// superviseFlag is the shorthand for --mode supervise.
const superviseFlag = "supervise"

// flagAlone is the value of a flag given without one (--signal-group).
var flagAlone = map[string]string{"signal-group": "on"}

var superviseSettings = [...]setting{
	{flag: "mode", env: "PADDLE_ENTRYPOINT_MODE", def: string(ModeExec),
		help:  "exec (replace the entrypoint with the command) or supervise (run it as a child and report how it ended)",
		parse: func(c *Config, s string) error { return mode(&c.Mode, s) }},
	{flag: "signal-group", env: "PADDLE_SIGNAL_GROUP", def: "0",
		help:  "supervise mode: forward signals to the command's process group (the command leads a new group)",
		parse: func(c *Config, s string) error { return boolean(&c.SignalGroup, s) }},
	{flag: "complete-budget", env: "PADDLE_COMPLETE_BUDGET", def: DefaultCompleteBudget.String(),
		help:  "supervise mode: time from the command's end to the supervisor's exit, for reporting",
		parse: func(c *Config, s string) error { return duration(&c.CompleteBudget, s) }},
	{flag: "gpu-sample", env: "PADDLE_GPU_SAMPLE", def: DefaultGPUSample.String(),
		help:  "supervise mode: GPU utilisation sampling interval; 0 turns sampling off",
		parse: func(c *Config, s string) error { return duration(&c.GPUSample, s) }},
	{flag: "heartbeat", env: "PADDLE_HEARTBEAT", def: "0",
		help:  "supervise mode: heartbeat interval while the command runs; 0 (default) turns it off",
		parse: func(c *Config, s string) error { return duration(&c.Heartbeat, s) }},
}

func mode(dst *Mode, s string) error {
	var m string
	if err := oneOf(&m, s, string(ModeExec), string(ModeSupervise)); err != nil {
		return err
	}
	*dst = Mode(m)
	return nil
}

func boolean(dst *bool, s string) error {
	switch strings.ToLower(s) {
	case "1", "true", "yes", "on":
		*dst = true
	case "0", "false", "no", "off":
		*dst = false
	default:
		return fmt.Errorf("%q is not 1 or 0", s)
	}
	return nil
}

// superviseFlagWins applies --supervise, which may not contradict --mode.
func superviseFlagWins(c *Config, flags *FlagSet) error {
	if flags == nil || !flags.Changed(superviseFlag) {
		return nil
	}
	on, err := flags.GetBool(superviseFlag)
	if err != nil || !on {
		return nil
	}
	if flags.Changed("mode") && c.Mode != ModeSupervise {
		return fmt.Errorf("%w: --supervise contradicts --mode %s", ErrUsage, c.Mode)
	}
	c.Mode = ModeSupervise
	return nil
}
