package config

import (
	"fmt"
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

var superviseSettings = []setting{
	{Flag: "mode", Var: "PADDLE_ENTRYPOINT_MODE", Type: "string", Default: string(ModeExec),
		Doc:   "exec (replace the entrypoint with the command) or supervise (run it as a child and report how it ended)",
		Parse: func(c *Config, s string) error { return mode(&c.Mode, s) }},
	{Flag: "signal-group", Var: "PADDLE_SIGNAL_GROUP", Type: "on|off", Default: "0", Alone: "on",
		Doc:   "supervise mode: forward signals to the command's process group (the command leads a new group)",
		Parse: func(c *Config, s string) error { return onOff(&c.SignalGroup, s) }},
	{Flag: "complete-budget", Var: "PADDLE_COMPLETE_BUDGET", Type: "duration", Default: DefaultCompleteBudget.String(),
		Doc:   "supervise mode: time from the command's end to the supervisor's exit, for reporting",
		Parse: func(c *Config, s string) error { return duration(&c.CompleteBudget, s) }},
	{Flag: "gpu-sample", Var: "PADDLE_GPU_SAMPLE", Type: "duration", Default: DefaultGPUSample.String(),
		Doc:   "supervise mode: GPU utilisation sampling interval; 0 turns sampling off",
		Parse: func(c *Config, s string) error { return duration(&c.GPUSample, s) }},
	{Flag: "heartbeat", Var: "PADDLE_HEARTBEAT", Type: "duration", Default: "0",
		Doc:   "supervise mode: heartbeat interval while the command runs; 0 (default) turns it off",
		Parse: func(c *Config, s string) error { return duration(&c.Heartbeat, s) }},
}

func mode(dst *Mode, s string) error {
	var m string
	if err := oneOf(&m, s, string(ModeExec), string(ModeSupervise)); err != nil {
		return err
	}
	*dst = Mode(m)
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
