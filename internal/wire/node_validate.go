package wire

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

func bad(field, format string, args ...any) error {
	return &FieldError{Path: field, Rule: fmt.Sprintf(format, args...)}
}

// DecodeNodeReport decodes a node report's body: a *BodyError when it is
// not one JSON object, a *FieldError naming a field of the wrong type.
// Keys it does not know are ignored. Validate checks the bounds.
func DecodeNodeReport(body []byte) (*NodeReport, error) {
	var r NodeReport
	if err := decode(body, &r, "a node report"); err != nil {
		return nil, err
	}
	return &r, nil
}

// MaxNodeStringBytes bounds every free-text field of a node report (IDs,
// names, cgroup paths, declared labels).
const MaxNodeStringBytes = 1024

// sliceTolerance absorbs float rounding in the sum of an instance's weights.
const sliceTolerance = 1e-9

// Validate checks r against every bound of docs/node.md ("The report") and
// returns the first problem as a *FieldError naming the field, nil when r
// may be stored. now is the monitor's clock: time may be at most
// MaxNodeFutureSecond ahead of it (never clamped).
//
// A GPU re-partitioned within the interval lists its old and new MIG
// instances, each with its own samples; the rule that the instances'
// slices add up to at most total_slices is applied to their time-weighted
// slices (slices × samples / the report's samples), which is the plain sum
// when every instance lived the whole interval.
func (r *NodeReport) Validate(now time.Time) error {
	if r.SchemaVersion != NodeReportSchemaVersion {
		return bad("schema_version", "must be %d, got %d", NodeReportSchemaVersion, r.SchemaVersion)
	}
	if err := HostName(r.Node); err != nil {
		return bad("node", "%v", err)
	}
	if r.Time <= 0 {
		return bad("time", "must be a positive number of Unix seconds, got %d", r.Time)
	}
	if limit := now.Unix() + MaxNodeFutureSecond; r.Time > limit {
		return bad("time", "%d is more than 24 h ahead of the monitor's clock (%d)", r.Time, now.Unix())
	}
	if r.IntervalSeconds <= 0 || r.IntervalSeconds > MaxNodeInterval {
		return bad("interval_seconds", "must be in (0, %d], got %d", MaxNodeInterval, r.IntervalSeconds)
	}
	if r.Samples < 0 {
		return bad("samples", "must be at least 0, got %d", r.Samples)
	}
	if err := text("agent_version", r.AgentVersion); err != nil {
		return err
	}
	gpus := make(map[string]bool, len(r.GPUs))
	for i, g := range r.GPUs {
		f := fmt.Sprintf("gpus[%d]", i)
		if g.UUID == "" {
			return bad(f+".uuid", "must not be empty")
		}
		if err := text(f+".uuid", g.UUID); err != nil {
			return err
		}
		if gpus[g.UUID] {
			return bad(f+".uuid", "%q is listed twice", g.UUID)
		}
		gpus[g.UUID] = true
		if err := nonNegative(f+".energy_joules", g.EnergyJoules); err != nil {
			return err
		}
	}
	if len(r.Instances) > MaxNodeInstances {
		return bad("instances", "at most %d instances, got %d", MaxNodeInstances, len(r.Instances))
	}
	type key struct {
		uuid string
		gi   int
	}
	type parent struct {
		whole, mig   bool
		total        int
		weighted     float64
		firstMIGPath string
	}
	seen := map[key]bool{}
	parents := map[string]*parent{}
	for i := range r.Instances {
		in := &r.Instances[i]
		f := fmt.Sprintf("instances[%d]", i)
		if err := r.checkInstance(f, in); err != nil {
			return err
		}
		k := key{in.UUID, -1}
		if in.GPUInstanceID != nil {
			k.gi = *in.GPUInstanceID
		}
		if seen[k] {
			return bad(f+".gpu_instance_id", "(uuid %q, gpu_instance_id %s) is listed twice", in.UUID, giText(in.GPUInstanceID))
		}
		seen[k] = true
		p := parents[in.UUID]
		if p == nil {
			p = &parent{}
			parents[in.UUID] = p
		}
		if in.GPUInstanceID == nil {
			p.whole = true
		} else {
			if !p.mig {
				p.total, p.firstMIGPath = in.TotalSlices, f
			} else if in.TotalSlices != p.total {
				return bad(f+".total_slices", "%d differs from %s.total_slices %d (one GPU has one total)", in.TotalSlices, p.firstMIGPath, p.total)
			}
			p.mig = true
			if r.Samples > 0 {
				p.weighted += float64(in.Slices) * float64(in.Samples) / float64(r.Samples)
			}
			if p.weighted > float64(p.total)+sliceTolerance {
				return bad(f+".slices", "the slices of GPU %q's instances add up to more than its total_slices %d", in.UUID, p.total)
			}
		}
		if p.whole && p.mig {
			return bad(f+".gpu_instance_id", "GPU %q is listed both whole (gpu_instance_id null) and as MIG instances: a GPU is one or the other within a report", in.UUID)
		}
	}
	return nil
}

func giText(gi *int) string {
	if gi == nil {
		return "null"
	}
	return fmt.Sprint(*gi)
}

func (r *NodeReport) checkInstance(f string, in *NodeInstance) error {
	if in.UUID == "" {
		return bad(f+".uuid", "must not be empty")
	}
	for _, s := range []struct{ field, v string }{{"uuid", in.UUID}, {"profile", in.Profile}, {"name", in.Name}} {
		if err := text(f+"."+s.field, s.v); err != nil {
			return err
		}
	}
	if len(in.MIGUUIDs) > MaxNodeTotalSlices {
		return bad(f+".mig_uuids", "at most %d, got %d", MaxNodeTotalSlices, len(in.MIGUUIDs))
	}
	for j, m := range in.MIGUUIDs {
		if err := text(fmt.Sprintf("%s.mig_uuids[%d]", f, j), m); err != nil {
			return err
		}
	}
	if in.GPUInstanceID != nil {
		if *in.GPUInstanceID < 0 {
			return bad(f+".gpu_instance_id", "must be at least 0 or null, got %d", *in.GPUInstanceID)
		}
		if in.TotalSlices < 1 || in.TotalSlices > MaxNodeTotalSlices {
			return bad(f+".total_slices", "must be in [1, %d] for a MIG instance, got %d", MaxNodeTotalSlices, in.TotalSlices)
		}
		if in.Slices < 1 {
			return bad(f+".slices", "must be at least 1 for a MIG instance, got %d", in.Slices)
		}
	} else {
		// A whole GPU, or a MIG-mode GPU without instances (slices 0, no
		// users: all of it unallocated).
		if in.Slices != 0 {
			return bad(f+".slices", "must be 0 without a gpu_instance_id, got %d", in.Slices)
		}
		if in.TotalSlices < 0 || in.TotalSlices > MaxNodeTotalSlices {
			return bad(f+".total_slices", "must be in [0, %d], got %d", MaxNodeTotalSlices, in.TotalSlices)
		}
		if in.TotalSlices > 0 && len(in.Users) > 0 {
			return bad(f+".users", "a MIG-mode GPU without instances has no users")
		}
	}
	if in.Samples < 0 || in.Samples > r.Samples {
		return bad(f+".samples", "must be in [0, the report's samples %d], got %d", r.Samples, in.Samples)
	}
	if err := percent(f+".util_mean", in.UtilMean); err != nil {
		return err
	}
	if err := fraction(f+".busy_share", in.BusyShare); err != nil {
		return err
	}
	if err := fraction(f+".occupied_share", in.OccupiedShare); err != nil {
		return err
	}
	switch in.BusyBasis {
	case "", BusyBasisUtilization, BusyBasisProcesses:
	default:
		return bad(f+".busy_basis", "must be %q or %q, got %q", BusyBasisUtilization, BusyBasisProcesses, in.BusyBasis)
	}
	if err := nonNegative(f+".energy_joules", in.EnergyJoules); err != nil {
		return err
	}
	if len(in.Users) > MaxInstanceUsers {
		return bad(f+".users", "at most %d users per instance, got %d", MaxInstanceUsers, len(in.Users))
	}
	for j := range in.Users {
		if err := checkUser(fmt.Sprintf("%s.users[%d]", f, j), &in.Users[j]); err != nil {
			return err
		}
	}
	return nil
}

func checkUser(f string, u *NodeUser) error {
	for _, s := range []struct{ field, v string }{{"runtime", u.Runtime}, {"container_id", u.ContainerID}, {"pod_uid", u.PodUID},
		{"namespace", u.Namespace}, {"pod", u.Pod}, {"container", u.Container}, {"slurm_job", u.SlurmJob}, {"cgroup", u.Cgroup},
		{"allocation", u.Allocation}, {"claim_namespace", u.ClaimNamespace}, {"claim_name", u.ClaimName}} {
		if err := text(f+"."+s.field, s.v); err != nil {
			return err
		}
	}
	if u.UID != nil && *u.UID < 0 {
		return bad(f+".uid", "must be at least 0 or null, got %d", *u.UID)
	}
	for _, s := range []struct {
		field string
		v     float64
	}{{"allocated_share", u.AllocatedShare}, {"seen_share", u.SeenShare}, {"busy_share", u.BusyShare}} {
		if err := fraction(f+"."+s.field, s.v); err != nil {
			return err
		}
	}
	if err := percent(f+".sm_util_mean", u.SMUtilMean); err != nil {
		return err
	}
	if c := u.CapacityShare; c != nil && (math.IsNaN(*c) || *c <= 0 || *c > 1) {
		return bad(f+".capacity_share", "must be in (0, 1] or absent, got %v", *c)
	}
	if d := u.Declared; d != nil {
		for _, s := range []struct{ field, v string }{{"task_id", d.TaskID}, {"project", d.Project}, {"owner", d.Owner}} {
			if err := text(f+".declared."+s.field, s.v); err != nil {
				return err
			}
		}
	}
	return nil
}

func fraction(field string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return bad(field, "must be in [0, 1], got %v", v)
	}
	return nil
}

func percent(field string, v *float64) error {
	if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 100) {
		return bad(field, "must be in [0, 100] or null, got %v", *v)
	}
	return nil
}

func nonNegative(field string, v *float64) error {
	if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
		return bad(field, "must be at least 0 or null, got %v", *v)
	}
	return nil
}

func text(field, v string) error {
	if len(v) > MaxNodeStringBytes {
		return bad(field, "at most %d bytes, got %d", MaxNodeStringBytes, len(v))
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return bad(field, "must not hold control characters")
	}
	return nil
}

// HostName checks that name is an RFC 1123 host name: dot-separated labels
// of 1 to 63 letters, digits and '-', neither beginning nor ending with
// '-', at most MaxNodeNameBytes bytes in all.
func HostName(name string) error {
	if name == "" {
		return errors.New("must be a host name, got an empty string")
	}
	if len(name) > MaxNodeNameBytes {
		return fmt.Errorf("at most %d bytes, got %d", MaxNodeNameBytes, len(name))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a host name (each dot-separated label 1 to 63 characters)", name)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a host name (a label neither begins nor ends with '-')", name)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%q is not a host name (letters, digits, '-' and '.' only)", name)
			}
		}
	}
	return nil
}
