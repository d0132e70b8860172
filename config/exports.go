package config

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultGateExit is the exit status of a failed quality gate.
const DefaultGateExit = 1

// exportSettings are the task identity exports and the quality gate
// (docs/pipelines.md).
var exportSettings = [...]setting{
	{flag: "otel", env: "PADDLE_OTEL", def: "on",
		help:  "on: merge the task's identity into the command's OTEL_RESOURCE_ATTRIBUTES; off: leave it alone",
		parse: func(c *Config, s string) error { return onOff(&c.OTel, s) }},
	{flag: "textfile-dir", env: "PADDLE_TEXTFILE_DIR", def: "",
		help:  "directory read by node_exporter's textfile collector, receiving paddle-task-<task_id>.prom; empty: off",
		parse: func(c *Config, s string) error { c.TextfileDir = s; return nil }},
	{flag: "gpu-shared", env: "PADDLE_GPU_SHARED", def: "0",
		help:  "on: the GPUs are shared (time-slicing, MPS), so another task's textfile claiming them is not stale",
		parse: func(c *Config, s string) error { return onOff(&c.GPUShared, s) }},
	{flag: "gpu-share", env: "PADDLE_GPU_SHARE", def: "1",
		help:  "the fraction (0, 1] of each whole GPU the task holds on a time-sliced or MPS GPU (4 replicas: 0.25); below 1 implies --gpu-shared; MIG instances take slices/total_slices",
		parse: func(c *Config, s string) error { return gpuShare(&c.GPUShare, s) }},
	// The gate expression is kept as given: a malformed one is a usage
	// error even from the environment (main checks it before the command
	// starts), not a warning.
	{flag: "gate", env: "PADDLE_GATE", def: "",
		help:  "supervise mode: quality gate such as 'accuracy>=0.95', checked against --gate-file after the command exits 0",
		parse: func(c *Config, s string) error { c.Gate = s; return nil }},
	{flag: "gate-file", env: "PADDLE_GATE_FILE", def: "",
		help:  "supervise mode: JSON object of the step's metrics that the gate reads",
		parse: func(c *Config, s string) error { c.GateFile = s; return nil }},
	{flag: "gate-exit", env: "PADDLE_GATE_EXIT", def: strconv.Itoa(DefaultGateExit),
		help:  "exit status (1-255) when the gate fails or its file is missing",
		parse: func(c *Config, s string) error { return exitStatus(&c.GateExit, s) }},
}

func onOff(dst *bool, s string) error {
	switch strings.ToLower(s) {
	case "1", "on", "true", "yes":
		*dst = true
	case "0", "off", "false", "no":
		*dst = false
	default:
		return fmt.Errorf("%q is not one of on, off, 1, 0", s)
	}
	return nil
}

// gpuShare reads a share of a GPU: a decimal number in (0, 1].
func gpuShare(dst *float64, s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || strings.ContainsAny(s, "xXpPnNiI_") || !(f > 0 && f <= 1) {
		return fmt.Errorf("%q is not a decimal number greater than 0 and at most 1", s)
	}
	*dst = f
	return nil
}

func exitStatus(dst *int, s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 255 {
		return fmt.Errorf("%q is not an exit status from 1 to 255", s)
	}
	*dst = n
	return nil
}
