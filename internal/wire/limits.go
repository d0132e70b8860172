package wire

import "math"

// This file is the one table of the contract's limits: the entrypoint's
// bodies first, then the node agent's report. A new bound goes here, with
// the docs/contract.md or docs/node.md line it implements, and its check in
// the body's Validate.

// SchemaVersion is the version of the entrypoint's bodies (registration,
// completion); a monitor accepts any version from 1 up and ignores the
// fields it does not know.
const SchemaVersion = 1

// Limits of the entrypoint's bodies (docs/contract.md, "Bounds"). A body
// over one of them is answered 400 naming the field.
const (
	// MaxUnix bounds a time in Unix seconds: far past any real clock, and
	// it keeps sums of times and durations exact in an int64 or float64.
	MaxUnix = 1 << 40
	// MaxGPUCount bounds a registration's gpu_count.
	MaxGPUCount = 1024
	// MaxGPUList bounds the entries of a gpus list (registration,
	// completion, heartbeat): no node has more.
	MaxGPUList = 256
	// MaxMetrics bounds a completion's metrics: the quality gate sends the
	// first MaxMetrics keys of its file.
	MaxMetrics = 32
	// MaxTotalSlices bounds a registration's MIG total_slices (and so its
	// slices): no GPU in MIG mode has more than 8 (NVML's have 7 or 8).
	MaxTotalSlices = 8
	// MinWholeGPUShare is the least share of a whole GPU (not MIG) a
	// registration may declare.
	MinWholeGPUShare = 0.01
	// MaxEnergyJoules bounds a GPU's energy over one task: 10 kW for a
	// century is about 3e13 J.
	MaxEnergyJoules = 1e15
	// MaxDurationEst bounds duration_est, in seconds: one year.
	MaxDurationEst = 31536000
	// MaxExitCode bounds exit_code (a process's exit status).
	MaxExitCode = 255
	// MaxID bounds the small identifiers and counters: schema_version,
	// k8s_job_index, a GPU's index, MIG instance ids.
	MaxID = math.MaxInt32
	// MaxUUIDBytes bounds a GPU's or MIG instance's UUID and a GPU's name.
	MaxUUIDBytes = 128
	// MaxProfileBytes bounds a MIG profile's name (1g.10gb).
	MaxProfileBytes = 64
	// MaxGateTextBytes bounds a gate's expr and reason.
	MaxGateTextBytes = 1024
	// MaxPercent bounds a utilisation, in percent.
	MaxPercent = 100
)

// NodeReportSchemaVersion is the version of the node report body.
const NodeReportSchemaVersion = 1

// Limits of a node report (docs/node.md, "The report"; the monitor answers a
// body over them with a 400 naming the field).
const (
	MaxNodeReportBytes  = 256 << 10 // decoded body
	MaxNodeInstances    = 64        // instances per report
	MaxInstanceUsers    = 256       // users per instance
	MaxNodeInterval     = 86400     // interval_seconds, in (0, MaxNodeInterval]
	MaxNodeTotalSlices  = 8         // total_slices of a MIG GPU, in [1, MaxNodeTotalSlices]
	MaxNodeNameBytes    = 253       // node names are RFC 1123 host names
	MaxNodeFutureSecond = 24 * 3600 // time at most this far ahead of the monitor's clock
	// MaxNodeStringBytes bounds every free-text field of a node report
	// (IDs, names, cgroup paths, declared labels).
	MaxNodeStringBytes = 1024
)
