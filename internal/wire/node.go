package wire

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
)

// NodeReport is one interval's observations of one node by paddle-node:
// POST /v1/nodes/report. It covers [Time-IntervalSeconds, Time).
type NodeReport struct {
	SchemaVersion   int    `json:"schema_version"`
	Node            string `json:"node"`
	Time            int64  `json:"time"`
	IntervalSeconds int64  `json:"interval_seconds"`
	AgentVersion    string `json:"agent_version"`
	Samples         int    `json:"samples"`
	Final           bool   `json:"final"`
	// SentAt is the agent's clock when it sent the report (RFC 3339),
	// set at each attempt, not when the report was spooled: the monitor's
	// clock-skew gauge is sent_at minus the receipt time (docs/node.md).
	SentAt    string         `json:"sent_at,omitempty"`
	GPUs      []NodeGPU      `json:"gpus"`
	Instances []NodeInstance `json:"instances"`
}

// NodeGPU is one GPU of the node, whole or in MIG mode, with its energy
// counter's increase over the interval (nil when unsupported or reset).
type NodeGPU struct {
	UUID         string   `json:"uuid"`
	EnergyJoules *float64 `json:"energy_joules"`
}

// NodeInstance is a whole GPU (GPUInstanceID nil) or one MIG GPU instance.
type NodeInstance struct {
	UUID             string     `json:"uuid"`
	GPUInstanceID    *int       `json:"gpu_instance_id"`
	Profile          string     `json:"profile"`
	Slices           int        `json:"slices"`
	TotalSlices      int        `json:"total_slices"`
	MIGUUIDs         []string   `json:"mig_uuids"`
	Name             string     `json:"name"`
	MemoryTotalBytes uint64     `json:"memory_total_bytes"`
	Samples          int        `json:"samples"`
	UtilMean         *float64   `json:"util_mean"`
	BusyShare        float64    `json:"busy_share"`
	BusyBasis        string     `json:"busy_basis"` // "utilization" or "processes"
	OccupiedShare    float64    `json:"occupied_share"`
	EnergyJoules     *float64   `json:"energy_joules"`
	EnergyEstimated  bool       `json:"energy_estimated"`
	Users            []NodeUser `json:"users"`
}

// Busy bases of an instance.
const (
	BusyBasisUtilization = "utilization"
	BusyBasisProcesses   = "processes"
)

// NodeUser is one user of an instance: a container, a Slurm job or a host
// user (cgroup and UID set only for host users).
type NodeUser struct {
	Runtime             string       `json:"runtime"`
	ContainerID         string       `json:"container_id"`
	PodUID              string       `json:"pod_uid"`
	Namespace           string       `json:"namespace"`
	Pod                 string       `json:"pod"`
	Container           string       `json:"container"`
	SlurmJob            string       `json:"slurm_job"`
	UID                 *int64       `json:"uid"`
	Cgroup              string       `json:"cgroup"`
	AllocatedShare      float64      `json:"allocated_share"`
	SeenShare           float64      `json:"seen_share"`
	BusyShare           float64      `json:"busy_share"`
	SMUtilMean          *float64     `json:"sm_util_mean"`
	UsedMemoryPeakBytes uint64       `json:"used_memory_peak_bytes"`
	Declared            *Declaration `json:"declared"`
	// Allocation says where the allocation came from when it was not a
	// device plugin's device ID or a runtime's request: "dra" (a
	// Dynamic Resource Allocation claim) or "hami" (a fractional plugin's
	// annotation); omitted otherwise. ClaimNamespace and ClaimName name the
	// DRA claim. None of these is part of the user's identity.
	Allocation     string `json:"allocation,omitempty"`
	ClaimNamespace string `json:"claim_namespace,omitempty"`
	ClaimName      string `json:"claim_name,omitempty"`
	// CapacityShare is the part of the instance the allocation gives (a
	// DRA consumable-capacity share, a HAMi core share, 1/n for n
	// time-sliced holders; 1 for a whole device): the user is attributed
	// at most capacity_share × the instance's weighted seconds, the rest
	// of its occupied time is unallocated. nil: not a fractional
	// allocation (the presence split alone applies).
	CapacityShare *float64 `json:"capacity_share,omitempty"`
}

// Allocation kinds of a node user.
const (
	AllocationDRA  = "dra"
	AllocationHAMi = "hami"
)

// Declaration is what a container's labels file says: who pays. It names
// the payer only when the monitor can tie it to the container.
type Declaration struct {
	TaskID  string `json:"task_id"`
	Project string `json:"project"`
	Owner   string `json:"owner"`
}
