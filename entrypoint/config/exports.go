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
var exportSettings = []setting{
	{Flag: "otel", Var: "PADDLE_OTEL", Type: "on|off", Default: "on",
		Doc:   "on: merge the task's identity into the command's OTEL_RESOURCE_ATTRIBUTES; off: leave it alone",
		Parse: func(c *Config, s string) error { return onOff(&c.OTel, s) }},
	{Flag: "textfile-dir", Var: "PADDLE_TEXTFILE_DIR", Type: "string", Default: "",
		Doc:   "directory read by node_exporter's textfile collector, receiving paddle-task-<task_id>.prom; empty: off",
		Parse: func(c *Config, s string) error { c.TextfileDir = s; return nil }},
	{Flag: "gpu-shared", Var: "PADDLE_GPU_SHARED", Type: "on|off", Default: "0",
		Doc:   "on: the GPUs are shared (time-slicing, MPS), so another task's textfile claiming them is not stale",
		Parse: func(c *Config, s string) error { return onOff(&c.GPUShared, s) }},
	{Flag: "gpu-share", Var: "PADDLE_GPU_SHARE", Type: "number", Default: "1",
		Doc:   "the fraction [0.01, 1] of each whole GPU the task holds on a time-sliced or MPS GPU (4 replicas: 0.25); below 1 implies --gpu-shared; MIG instances take slices/total_slices",
		Parse: func(c *Config, s string) error { return gpuShare(&c.GPUShare, s) }},
	// The gate expression is kept as given: a malformed one is a usage
	// error even from the environment (main checks it before the command
	// starts), not a warning.
	{Flag: "gate", Var: "PADDLE_GATE", Type: "string", Default: "",
		Doc:   "supervise mode: quality gate such as 'accuracy>=0.95', checked against --gate-file after the command exits 0",
		Parse: func(c *Config, s string) error { c.Gate = s; return nil }},
	{Flag: "gate-file", Var: "PADDLE_GATE_FILE", Type: "string", Default: "",
		Doc:   "supervise mode: JSON object of the step's metrics that the gate reads",
		Parse: func(c *Config, s string) error { c.GateFile = s; return nil }},
	{Flag: "gate-exit", Var: "PADDLE_GATE_EXIT", Type: "int", Default: strconv.Itoa(DefaultGateExit),
		Doc:   "exit status (1-255) when the gate fails or its file is missing",
		Parse: func(c *Config, s string) error { return exitStatus(&c.GateExit, s) }},
}

// gpuShare reads a share of a GPU: a decimal number in [0.01, 1] (the
// monitor refuses a whole GPU's share below 0.01, which would make the
// registration a dead letter).
func gpuShare(dst *float64, s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || strings.ContainsAny(s, "xXpPnNiI_") || !(f >= 0.01 && f <= 1) {
		return fmt.Errorf("%q is not a decimal number from 0.01 to 1", s)
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
