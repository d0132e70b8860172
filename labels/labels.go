// Package labels reads a task's labels from its PADDLE_* environment,
// checks them, and writes them as the labels file that node agents scan.
//
// Guarantees: every value in a Set follows the name rule (see wire.ValidName) or
// is one of a closed list, so no value can add a line to the labels file or a
// key to a JSON body; sensitive data (see package sensitive) never reaches a
// Set; and Parse never fails: a bad value is dropped, its default kept, and
// the problem reported, so the caller chooses between warn and enforce.
package labels

import (
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// ExtraPrefix starts the environment variables of extra labels.
const ExtraPrefix = "PADDLE_LABEL_"

// Defaults of the three labels the shell script always wrote.
const (
	DefaultTaskName = "unknown_task"
	DefaultProject  = "default"
	DefaultOwner    = "anonymous"
)

// MaxDurationEst is the longest duration estimate accepted, in seconds (a year).
const MaxDurationEst = 31536000

// reserved are the keys an extra label may not take: every built-in or
// computed key, and every top-level key of the registration body.
var reserved = map[string]bool{
	"task_name": true, "project": true, "owner": true, "priority": true,
	"env": true, "duration_est": true, "task_id": true, "gpu_count": true,
	"gpu_uuids": true, "hostname": true, "start_time": true, "submit_time": true,
	"trainer_id": true, "trainers_num": true, "invalid_labels": true,
	"schema_version": true, "labels": true, "gpus": true, "driver_version": true,
}

// Set is a task's checked labels.
type Set struct {
	TaskName, Project, Owner string
	Priority                 string // "" when not set
	Env                      string // "" when not set
	DurationEst              int64  // seconds; 0 when not set
	TaskID                   string
	Hostname                 string
	StartTime                int64 // Unix seconds
	// SubmitTime is when the task was submitted (PADDLE_SUBMIT_TIME), Unix
	// seconds; 0 when not set. It is sent in the registration only: the
	// labels file keeps its keys.
	SubmitTime             int64
	TrainerID, TrainersNum string
	GPUCount               int
	GPUUUIDs               []string
	// Identity is the task's pipeline step and Kubernetes pod.
	Identity
	// Extra holds the PADDLE_LABEL_<NAME> labels by lower-cased key.
	Extra map[string]string
	// Invalid lists the keys whose value was dropped, in file order.
	Invalid []string
}

// Pair is one key=value line of the labels file.
type Pair struct{ Key, Value string }

// Problem is one rule a task's labels broke. Its text names the variable and
// the rule, never a sensitive value.
type Problem struct {
	Var  string // the environment variable, e.g. PADDLE_PROJECT
	Key  string // the label key, "" when the key itself is unusable
	Rule string // what is wrong, without the value when it is sensitive
	// Sensitive is the kind of sensitive data found, "" for other problems.
	Sensitive sensitive.Kind
	// Notice marks a problem that never rejects a start, even in enforce
	// mode, and is not listed in invalid_labels: a value an orchestrator
	// set (the task's author did not write it), or an extra label that
	// now names a built-in key.
	Notice bool
}

func (p Problem) Error() string { return p.Var + ": " + p.Rule }

// Options are the inputs of Parse that do not come from the environment.
type Options struct {
	Policy   *policy.Policy // nil: built-in rules only
	Hostname string
	Now      time.Time
	// NewID returns a fresh task id; nil means a random UUID.
	NewID func() string
}

// Parse reads the labels from environ (KEY=VALUE strings; the first of a
// repeated name wins, as with getenv). It always returns a usable Set:
// problems drop the offending value and keep the key's default.
func Parse(environ []string, opt Options) (*Set, []Problem) {
	env := envMap(environ)
	p := &parser{env: env, policy: opt.Policy}
	s := &Set{Extra: map[string]string{}, StartTime: opt.Now.Unix()}

	s.TaskName = p.name("PADDLE_TASK_NAME", "task_name", "", DefaultTaskName)
	s.Project = p.name("PADDLE_PROJECT", "project", "", DefaultProject)
	s.Owner = p.name("PADDLE_OWNER", "owner", "@+", DefaultOwner)
	s.Priority = p.oneOf("PADDLE_PRIORITY", "priority", "high", "medium", "low")
	s.Env = p.oneOf("PADDLE_ENV", "env", "dev", "staging", "prod")
	s.DurationEst = p.duration("PADDLE_DURATION_EST", "duration_est")
	s.SubmitTime = p.submitTime("PADDLE_SUBMIT_TIME", "submit_time", s.StartTime)
	s.TaskID = p.name("PADDLE_TASK_ID", "task_id", "", "")
	if s.TaskID == "" {
		s.TaskID = newID(opt.NewID)
	}
	s.TrainerID = p.count("PADDLE_TRAINER_ID", "trainer_id")
	s.TrainersNum = p.count("PADDLE_TRAINERS_NUM", "trainers_num")
	if wire.ValidName(opt.Hostname, "") {
		s.Hostname = opt.Hostname
	}
	p.extras(s)
	p.identity(s)
	p.required()
	s.Invalid = p.invalid
	return s, p.problems
}
