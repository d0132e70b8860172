package monitor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// fieldError is a 400 naming the field and the rule it broke.
type fieldError struct{ field, rule string }

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.rule }

// object is a JSON object body, decoded one field at a time so that an
// error can name the field. Fields it does not know are ignored (later
// schema versions only add fields).
type object map[string]json.RawMessage

func parseObject(body []byte, what string) (object, error) {
	var o object
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&o); err != nil || o == nil {
		return nil, fmt.Errorf("the body is not a JSON object (%s)", what)
	}
	if d.More() {
		return nil, fmt.Errorf("the body holds more than one JSON value (%s)", what)
	}
	return o, nil
}

func (o object) has(key string) bool {
	v, ok := o[key]
	return ok && string(v) != "null"
}

// str reads an optional string field.
func (o object) str(key string) (string, error) {
	if !o.has(key) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(o[key], &s); err != nil {
		return "", &fieldError{key, "must be a string"}
	}
	return s, nil
}

// name reads a label value that must follow the entrypoint's name rule.
// extra lists further characters allowed after the first.
func (o object) name(key string, required, mayBeEmpty bool, extra string) (string, error) {
	if !o.has(key) {
		if required {
			return "", &fieldError{key, "is required"}
		}
		return "", nil
	}
	s, err := o.str(key)
	if err != nil {
		return "", err
	}
	if s == "" && mayBeEmpty {
		return "", nil
	}
	if !labels.ValidName(s, extra) {
		return "", &fieldError{key, nameRule(extra)}
	}
	return s, nil
}

func nameRule(extra string) string {
	r := "must follow the name rule (1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit"
	if extra != "" {
		r += "; '" + strings.Join(strings.Split(extra, ""), "' and '") + "' allowed too"
	}
	return r + ")"
}

// integer reads an optional integer field within [lo, hi].
func (o object) integer(key string, required bool, lo, hi int64) (*int64, error) {
	if !o.has(key) {
		if required {
			return nil, &fieldError{key, "is required"}
		}
		return nil, nil
	}
	var n json.Number
	// json.Number also takes a quoted number ("5"): a string is not one.
	if raw := o[key]; len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return nil, &fieldError{key, "must be an integer"}
	}
	v, err := n.Int64()
	if err != nil {
		return nil, &fieldError{key, "must be an integer"}
	}
	if v < lo || v > hi {
		return nil, &fieldError{key, fmt.Sprintf("must be between %d and %d", lo, hi)}
	}
	return &v, nil
}

// number reads an optional finite number within [lo, hi].
func (o object) number(key string, required bool, lo, hi float64) (*float64, error) {
	if !o.has(key) {
		if required {
			return nil, &fieldError{key, "is required"}
		}
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(o[key], &f); err != nil {
		return nil, &fieldError{key, "must be a number"}
	}
	if f < lo || f > hi {
		return nil, &fieldError{key, fmt.Sprintf("must be between %g and %g", lo, hi)}
	}
	return &f, nil
}

func (o object) objects(key string) ([]object, error) {
	if !o.has(key) {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(o[key], &list); err != nil {
		return nil, &fieldError{key, "must be a list of objects"}
	}
	out := make([]object, len(list))
	for i, raw := range list {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&out[i]); err != nil || out[i] == nil {
			return nil, &fieldError{fmt.Sprintf("%s[%d]", key, i), "must be an object"}
		}
	}
	return out, nil
}

// within prefixes the field of a nested error with its parent.
func within(parent string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		return &fieldError{parent + "." + fe.field, fe.rule}
	}
	return err
}

// freeText checks a value that is not a label (a GPU's model name, UUID, a
// gate's reason): valid UTF-8, no control characters, at most max bytes.
func freeText(field, s string, max int) error {
	if !utf8.ValidString(s) || len(s) > max || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return &fieldError{field, fmt.Sprintf("must be text of at most %d bytes without control characters", max)}
	}
	return nil
}

const (
	maxUnix    = 1 << 40 // far past any real clock; keeps arithmetic safe
	maxGPUs    = 1024    // gpu_count
	maxGPUList = 256     // entries of a gpus list: no node has more
	maxMetrics = 64
)

// decodeRegistration checks a registration body (ENTRYPOINT.md sections 5
// and 11) and returns what the store keeps.
func decodeRegistration(body []byte) (*store.Registration, error) {
	o, err := parseObject(body, "a registration")
	if err != nil {
		return nil, err
	}
	r := &store.Registration{Body: body}
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
		extra    string
		empty    bool
	}{
		{"task_id", &r.TaskID, true, "", false},
		{"task_name", &r.TaskName, true, "", false},
		{"project", &r.Project, true, "", false},
		{"owner", &r.Owner, true, "@+", false},
		{"hostname", &r.Hostname, false, "", true},
		{"priority", &r.Priority, false, "", false},
		{"env", &r.Env, false, "", false},
		{"pipeline", &r.Pipeline, false, "", false},
		{"pipeline_run", &r.PipelineRun, false, "", false},
		{"step", &r.Step, false, "", false},
		{"orchestrator", &r.Orchestrator, false, "", false},
		{"k8s_namespace", &r.K8sNamespace, false, "", false},
		{"k8s_pod", &r.K8sPod, false, "", false},
		{"k8s_node", &r.K8sNode, false, "", false},
		{"k8s_pod_uid", &r.K8sPodUID, false, "", false},
	} {
		if *f.dst, err = o.name(f.key, f.required, f.empty, f.extra); err != nil {
			return nil, err
		}
	}
	start, err := o.integer("start_time", true, 0, maxUnix)
	if err != nil {
		return nil, err
	}
	r.StartTime = *start
	if r.SubmitTime, err = o.integer("submit_time", false, 0, maxUnix); err != nil {
		return nil, err
	}
	if r.SubmitTime != nil && *r.SubmitTime > r.StartTime {
		return nil, &fieldError{"submit_time", "must not be after start_time (a task is submitted before it starts)"}
	}
	if _, err := o.integer("schema_version", false, 1, math.MaxInt32); err != nil {
		return nil, err
	}
	if r.K8sJobIndex, err = o.integer("k8s_job_index", false, 0, math.MaxInt32); err != nil {
		return nil, err
	}
	if r.DurationEst, err = o.integer("duration_est", false, 1, 31536000); err != nil {
		return nil, err
	}
	if err := decodeLabels(o, r); err != nil {
		return nil, err
	}
	gpus, err := o.objects("gpus")
	if err != nil {
		return nil, err
	}
	if len(gpus) > maxGPUList {
		return nil, &fieldError{"gpus", fmt.Sprintf("must list at most %d GPUs", maxGPUList)}
	}
	for i, g := range gpus {
		field := fmt.Sprintf("gpus[%d]", i)
		var gpu store.RegisteredGPU
		idx, err := g.integer("index", false, 0, math.MaxInt32)
		if err != nil {
			return nil, within(field, err)
		}
		if idx != nil {
			gpu.Index = *idx
		} else {
			gpu.Index = int64(i)
		}
		if gpu.UUID, err = g.str("uuid"); err != nil {
			return nil, within(field, err)
		}
		if err := freeText(field+".uuid", gpu.UUID, 128); err != nil {
			return nil, err
		}
		if gpu.Model, err = g.str("name"); err != nil {
			return nil, within(field, err)
		}
		if err := freeText(field+".name", gpu.Model, 128); err != nil {
			return nil, err
		}
		mem, err := g.integer("memory_total_bytes", false, 0, math.MaxInt64)
		if err != nil {
			return nil, within(field, err)
		}
		if mem != nil {
			gpu.MemoryTotal = *mem
		}
		if gpu.MIG, err = decodeMIG(g, field); err != nil {
			return nil, err
		}
		share, err := g.share()
		if err != nil {
			return nil, within(field, err)
		}
		if share != nil {
			gpu.Share = *share
		}
		r.GPUs = append(r.GPUs, gpu)
	}
	count, err := o.integer("gpu_count", false, 0, maxGPUs)
	if err != nil {
		return nil, err
	}
	if count != nil {
		r.GPUCount = *count
	} else {
		r.GPUCount = int64(len(r.GPUs))
	}
	return r, nil
}

func decodeLabels(o object, r *store.Registration) error {
	r.Labels = map[string]string{}
	if !o.has("labels") {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(o["labels"], &m); err != nil {
		return &fieldError{"labels", "must be an object of strings"}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad key named is always the same one
	for _, k := range keys {
		if !labels.ValidName(k, "") {
			return &fieldError{"labels", fmt.Sprintf("key %q %s", k, nameRule(""))}
		}
		v, err := object(m).name(k, true, false, "")
		if err != nil {
			return within("labels", err)
		}
		r.Labels[k] = v
	}
	return nil
}

// share reads an optional GPU share: the fraction of the physical GPU, in
// (0, 1].
func (o object) share() (*float64, error) {
	v, err := o.number("share", false, 0, 1)
	if err != nil || v == nil {
		return v, err
	}
	if *v <= 0 {
		return nil, &fieldError{"share", "must be a number greater than 0 and at most 1"}
	}
	return v, nil
}

// maxSlices bounds a MIG profile's slices (NVML's GPUs have 7 or 8).
const maxSlices = 64

// decodeMIG reads a registration GPU entry's optional mig object
// (ENTRYPOINT.md section 12): the instance's uuid and gpu_instance_id are
// required (they identify the instance and its claim), the rest optional;
// slices never exceed total_slices.
func decodeMIG(g object, field string) (*store.MIG, error) {
	if !g.has("mig") {
		return nil, nil
	}
	field += ".mig"
	list, err := object{"mig": json.RawMessage("[" + string(g["mig"]) + "]")}.objects("mig")
	if err != nil {
		return nil, &fieldError{field, "must be an object {uuid, gpu_instance_id, compute_instance_id, profile, slices, total_slices}"}
	}
	o := list[0]
	m := &store.MIG{}
	if m.UUID, err = o.str("uuid"); err != nil {
		return nil, within(field, err)
	}
	if m.UUID == "" {
		return nil, &fieldError{field + ".uuid", "is required"}
	}
	if err := freeText(field+".uuid", m.UUID, 128); err != nil {
		return nil, err
	}
	gi, err := o.integer("gpu_instance_id", true, 0, math.MaxInt32)
	if err != nil {
		return nil, within(field, err)
	}
	m.GPUInstanceID = *gi
	if m.ComputeInstanceID, err = o.integer("compute_instance_id", false, 0, math.MaxInt32); err != nil {
		return nil, within(field, err)
	}
	if m.Profile, err = o.str("profile"); err != nil {
		return nil, within(field, err)
	}
	if err := freeText(field+".profile", m.Profile, 64); err != nil {
		return nil, err
	}
	if m.Slices, err = o.integer("slices", false, 1, maxSlices); err != nil {
		return nil, within(field, err)
	}
	if m.TotalSlices, err = o.integer("total_slices", false, 1, maxSlices); err != nil {
		return nil, within(field, err)
	}
	if m.Slices != nil && m.TotalSlices != nil && *m.Slices > *m.TotalSlices {
		return nil, &fieldError{field + ".slices", fmt.Sprintf("must be at most total_slices (%d)", *m.TotalSlices)}
	}
	return m, nil
}

// maxEnergyJoules bounds a GPU's energy over one task: 10 kW for a
// century is about 3e13 J.
const maxEnergyJoules = 1e15

// decodeCompletion checks a completion body (ENTRYPOINT.md section 10).
func decodeCompletion(body []byte) (*store.Completion, error) {
	o, err := parseObject(body, "a completion")
	if err != nil {
		return nil, err
	}
	c := &store.Completion{}
	if c.TaskID, err = o.name("task_id", true, false, ""); err != nil {
		return nil, err
	}
	end, err := o.integer("end_time", true, 0, maxUnix)
	if err != nil {
		return nil, err
	}
	c.EndTime = *end
	if c.StartTime, err = o.integer("start_time", false, 0, maxUnix); err != nil {
		return nil, err
	}
	dur, err := o.number("duration_seconds", true, 0, maxUnix)
	if err != nil {
		return nil, err
	}
	c.DurationSeconds = *dur
	exit, err := o.integer("exit_code", true, 0, 255)
	if err != nil {
		return nil, err
	}
	c.ExitCode = *exit
	if _, err := o.integer("schema_version", false, 1, math.MaxInt32); err != nil {
		return nil, err
	}
	if c.Signal, err = o.name("signal", false, true, ""); err != nil {
		return nil, err
	}
	if o.has("gate") {
		gates, err := object{"gate": json.RawMessage("[" + string(o["gate"]) + "]")}.objects("gate")
		if err != nil {
			return nil, &fieldError{"gate", "must be an object {expr, passed, reason}"}
		}
		g := gates[0]
		c.Gate = &store.Gate{}
		if c.Gate.Expr, err = g.str("expr"); err != nil {
			return nil, within("gate", err)
		}
		if c.Gate.Reason, err = g.str("reason"); err != nil {
			return nil, within("gate", err)
		}
		if err := freeText("gate.expr", c.Gate.Expr, 1024); err != nil {
			return nil, err
		}
		if err := freeText("gate.reason", c.Gate.Reason, 1024); err != nil {
			return nil, err
		}
		if !g.has("passed") || json.Unmarshal(g["passed"], &c.Gate.Passed) != nil {
			return nil, &fieldError{"gate.passed", "must be true or false"}
		}
	}
	if o.has("metrics") {
		if err := json.Unmarshal(o["metrics"], &c.Metrics); err != nil {
			return nil, &fieldError{"metrics", "must be an object of numbers"}
		}
		if len(c.Metrics) > maxMetrics {
			return nil, &fieldError{"metrics", fmt.Sprintf("must hold at most %d keys", maxMetrics)}
		}
		for k := range c.Metrics {
			if !labels.ValidName(k, "") {
				return nil, &fieldError{"metrics", fmt.Sprintf("key %q %s", k, nameRule(""))}
			}
		}
	}
	gpus, err := o.objects("gpus")
	if err != nil {
		return nil, err
	}
	if len(gpus) > maxGPUList {
		return nil, &fieldError{"gpus", fmt.Sprintf("must list at most %d GPUs", maxGPUList)}
	}
	for i, g := range gpus {
		field := fmt.Sprintf("gpus[%d]", i)
		var u store.GPUUsage
		if u.UUID, err = g.str("uuid"); err != nil {
			return nil, within(field, err)
		}
		if err := freeText(field+".uuid", u.UUID, 128); err != nil {
			return nil, err
		}
		samples, err := g.integer("samples", false, 0, math.MaxInt64)
		if err != nil {
			return nil, within(field, err)
		}
		if samples != nil {
			u.Samples = *samples
		}
		if u.UtilMean, err = g.number("util_mean", false, 0, 100); err != nil {
			return nil, within(field, err)
		}
		if u.UtilP95, err = g.number("util_p95", false, 0, 100); err != nil {
			return nil, within(field, err)
		}
		if u.MemoryUsedPeakBytes, err = g.integer("memory_used_peak_bytes", false, 0, math.MaxInt64); err != nil {
			return nil, within(field, err)
		}
		if u.IdleShare, err = g.number("idle_share", false, 0, 1); err != nil {
			return nil, within(field, err)
		}
		if u.MIGUUID, err = g.str("mig_uuid"); err != nil {
			return nil, within(field, err)
		}
		if err := freeText(field+".mig_uuid", u.MIGUUID, 128); err != nil {
			return nil, err
		}
		if u.EnergyJoules, err = g.number("energy_joules", false, 0, maxEnergyJoules); err != nil {
			return nil, within(field, err)
		}
		if g.has("energy_estimated") {
			var e bool
			if json.Unmarshal(g["energy_estimated"], &e) != nil {
				return nil, &fieldError{field + ".energy_estimated", "must be true or false"}
			}
			u.EnergyEstimated = &e
		}
		// The registration's share is the one that counts; the
		// completion's is checked, not kept.
		if _, err := g.share(); err != nil {
			return nil, within(field, err)
		}
		c.GPUs = append(c.GPUs, u)
	}
	return c, nil
}

// heartbeat is a decoded heartbeat body: Time is nil when the body had
// none (the server's clock then counts).
type heartbeat struct {
	Sampled store.Sampled
	Time    *int64
}

// decodeHeartbeat checks a heartbeat body: task_id, and optionally time,
// interval_seconds and gpus (ENTRYPOINT.md section 12).
func decodeHeartbeat(body []byte) (*heartbeat, error) {
	o, err := parseObject(body, "a heartbeat")
	if err != nil {
		return nil, err
	}
	hb := &heartbeat{}
	if hb.Sampled.TaskID, err = o.name("task_id", true, false, ""); err != nil {
		return nil, err
	}
	if hb.Time, err = o.integer("time", false, 0, maxUnix); err != nil {
		return nil, err
	}
	interval, err := o.number("interval_seconds", false, 0, maxUnix)
	if err != nil {
		return nil, err
	}
	if interval != nil {
		v := int64(math.Round(*interval))
		hb.Sampled.Interval = &v
	}
	gpus, err := o.objects("gpus")
	if err != nil {
		return nil, err
	}
	if len(gpus) > maxGPUs {
		return nil, &fieldError{"gpus", fmt.Sprintf("must list at most %d GPUs", maxGPUs)}
	}
	for i, g := range gpus {
		field := fmt.Sprintf("gpus[%d]", i)
		var s store.SampledGPU
		if !g.has("uuid") {
			return nil, &fieldError{field + ".uuid", "is required"}
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"uuid", &s.UUID}, {"mig_uuid", &s.MIGUUID}} {
			if *f.dst, err = g.str(f.key); err != nil {
				return nil, within(field, err)
			}
			if err := freeText(field+"."+f.key, *f.dst, 128); err != nil {
				return nil, err
			}
		}
		samples, err := g.integer("samples", true, 0, math.MaxInt64)
		if err != nil {
			return nil, within(field, err)
		}
		s.Samples = *samples
		if s.UtilMean, err = g.number("util_mean", false, 0, 100); err != nil {
			return nil, within(field, err)
		}
		hb.Sampled.GPUs = append(hb.Sampled.GPUs, s)
	}
	return hb, nil
}
