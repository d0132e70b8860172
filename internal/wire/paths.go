package wire

// The monitor's endpoints each body is posted to, below the base URL
// (docs/openapi.yaml): a sender names the path from here, so that the
// contract's bodies and their addresses are written down once.
const (
	RegisterPath   = "/v1/task/register"
	CompletePath   = "/v1/task/complete"
	HeartbeatPath  = "/v1/task/heartbeat"
	NodeReportPath = "/v1/nodes/report"
)
