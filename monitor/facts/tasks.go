package facts

// TaskGPU is one GPU (or MIG instance) a task held.
type TaskGPU struct {
	Model, Profile string
	MIG            bool
	Share          float64
	// EnergyJoules is what the completion reported (nil: none).
	EnergyJoules *float64
}

// TaskUsage is a task as the statement counts it.
type TaskUsage struct {
	// ID is the store's key of the task (ObservedTask.ID); 0 on an
	// undeclared line.
	ID                           int64
	TaskID, Name, Project, Owner string
	Labels                       map[string]string
	Start                        int64
	End                          *int64 // nil: no completion
	// Heartbeat says an open task has heartbeats (it is counted up to
	// its last one).
	Heartbeat bool
	// Seconds are counted inside the window.
	Seconds int64
	GPUs    []TaskGPU
	// UnlistedGPUs are counted without a model (device nodes).
	UnlistedGPUs int64
}

// RunningTask is an open task as a forecast counts it.
type RunningTask struct {
	// ID is the store's key of the task (an observed task forecasts at
	// its observed rate: ObservedTask.ID).
	ID             int64
	Project, Owner string
	// GPUCount is the registration's gpu_count; GPUs the listed ones
	// (GPUs counted and not listed count whole, at the default price).
	GPUCount int64
	GPUs     []RunningGPU
}

// RunningGPU is one listed GPU of a running task.
type RunningGPU struct {
	Model string
	// Share is the fraction of the GPU the task holds (1: whole).
	Share float64
	// MIG says the entry is a MIG instance, of Profile ("1g.18gb").
	MIG     bool
	Profile string
}
