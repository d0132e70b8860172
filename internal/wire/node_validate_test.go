package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// clock is the monitor's clock of the tests: the fixture's time.
var clock = time.Unix(1796132760, 0)

func fixture(t testing.TB) *NodeReport {
	t.Helper()
	b, err := os.ReadFile("testdata/node_report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r NodeReport
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func ptr[T any](v T) *T { return &v }

// TestNodeReportValidate: the fixture is valid, and each change breaks the
// rule it names: the error is a *FieldError with that field.
func TestNodeReportValidate(t *testing.T) {
	if err := fixture(t).Validate(clock); err != nil {
		t.Fatalf("the fixture: %v", err)
	}
	for _, tc := range []struct {
		name, field string
		change      func(r *NodeReport)
	}{
		{"schema 2", "schema_version", func(r *NodeReport) { r.SchemaVersion = 2 }},
		{"empty node", "node", func(r *NodeReport) { r.Node = "" }},
		{"node with underscore", "node", func(r *NodeReport) { r.Node = "gpu_node" }},
		{"node label starts with -", "node", func(r *NodeReport) { r.Node = "-gpu" }},
		{"node empty label", "node", func(r *NodeReport) { r.Node = "a..b" }},
		{"node label of 64", "node", func(r *NodeReport) { r.Node = strings.Repeat("a", 64) }},
		{"node of 254 bytes", "node", func(r *NodeReport) { r.Node = strings.Repeat(strings.Repeat("a", 62)+".", 4) + "ab" }},
		{"time 0", "time", func(r *NodeReport) { r.Time = 0 }},
		{"time 24 h and 1 s ahead", "time", func(r *NodeReport) { r.Time = clock.Unix() + 86401 }},
		{"interval 0", "interval_seconds", func(r *NodeReport) { r.IntervalSeconds = 0 }},
		{"interval over a day", "interval_seconds", func(r *NodeReport) { r.IntervalSeconds = 86401 }},
		{"samples -1", "samples", func(r *NodeReport) { r.Samples = -1 }},
		{"gpu uuid empty", "gpus[1].uuid", func(r *NodeReport) { r.GPUs[1].UUID = "" }},
		{"gpu twice", "gpus[1].uuid", func(r *NodeReport) { r.GPUs[1].UUID = r.GPUs[0].UUID }},
		{"gpu energy negative", "gpus[0].energy_joules", func(r *NodeReport) { r.GPUs[0].EnergyJoules = ptr(-1.0) }},
		{"65 instances", "instances", func(r *NodeReport) {
			for len(r.Instances) <= MaxNodeInstances {
				in := r.Instances[0]
				in.UUID = "GPU-" + strings.Repeat("x", len(r.Instances))
				r.Instances = append(r.Instances, in)
			}
		}},
		{"257 users", "instances[0].users", func(r *NodeReport) {
			for len(r.Instances[0].Users) <= MaxInstanceUsers {
				r.Instances[0].Users = append(r.Instances[0].Users, r.Instances[0].Users[0])
			}
		}},
		{"allocated_share over 1", "instances[0].users[0].allocated_share", func(r *NodeReport) { r.Instances[0].Users[0].AllocatedShare = 1.01 }},
		{"capacity_share 0", "instances[0].users[0].capacity_share", func(r *NodeReport) { r.Instances[0].Users[0].CapacityShare = ptr(0.0) }},
		{"capacity_share over 1", "instances[0].users[0].capacity_share", func(r *NodeReport) { r.Instances[0].Users[0].CapacityShare = ptr(1.5) }},
		{"capacity_share NaN", "instances[0].users[0].capacity_share", func(r *NodeReport) { r.Instances[0].Users[0].CapacityShare = ptr(math.NaN()) }},
		{"claim_name with a control character", "instances[0].users[0].claim_name", func(r *NodeReport) { r.Instances[0].Users[0].ClaimName = "a\x00b" }},
		{"seen_share negative", "instances[0].users[0].seen_share", func(r *NodeReport) { r.Instances[0].Users[0].SeenShare = -0.1 }},
		{"user busy_share over 1", "instances[0].users[0].busy_share", func(r *NodeReport) { r.Instances[0].Users[0].BusyShare = 2 }},
		{"sm_util_mean over 100", "instances[0].users[0].sm_util_mean", func(r *NodeReport) { r.Instances[0].Users[0].SMUtilMean = ptr(100.5) }},
		{"negative uid", "instances[0].users[0].uid", func(r *NodeReport) { r.Instances[0].Users[0].UID = ptr(int64(-1)) }},
		{"control character", "instances[0].users[0].namespace", func(r *NodeReport) { r.Instances[0].Users[0].Namespace = "a\nb" }},
		{"declared project too long", "instances[0].users[0].declared.project", func(r *NodeReport) {
			r.Instances[0].Users[0].Declared.Project = strings.Repeat("p", MaxNodeStringBytes+1)
		}},
		{"occupied_share over 1", "instances[0].occupied_share", func(r *NodeReport) { r.Instances[0].OccupiedShare = 1.5 }},
		{"busy_share negative", "instances[1].busy_share", func(r *NodeReport) { r.Instances[1].BusyShare = -1 }},
		{"util_mean negative", "instances[0].util_mean", func(r *NodeReport) { r.Instances[0].UtilMean = ptr(-1.0) }},
		{"busy_basis unknown", "instances[0].busy_basis", func(r *NodeReport) { r.Instances[0].BusyBasis = "guess" }},
		{"instance samples over the report's", "instances[1].samples", func(r *NodeReport) { r.Instances[1].Samples = 13 }},
		{"instance samples negative", "instances[0].samples", func(r *NodeReport) { r.Instances[0].Samples = -1 }},
		{"same instance twice", "instances[2].gpu_instance_id", func(r *NodeReport) { r.Instances[2].GPUInstanceID = ptr(1) }},
		{"whole GPU twice", "instances[1].gpu_instance_id", func(r *NodeReport) {
			r.Instances[1] = r.Instances[0]
		}},
		{"whole and MIG", "instances[1].gpu_instance_id", func(r *NodeReport) { r.Instances[1].UUID = "GPU-aaaa" }},
		{"total_slices 9", "instances[1].total_slices", func(r *NodeReport) { r.Instances[1].TotalSlices = 9 }},
		{"total_slices 0 on an instance", "instances[1].total_slices", func(r *NodeReport) { r.Instances[1].TotalSlices = 0 }},
		{"slices 0 on an instance", "instances[1].slices", func(r *NodeReport) { r.Instances[1].Slices = 0 }},
		{"totals differ", "instances[2].total_slices", func(r *NodeReport) { r.Instances[2].TotalSlices = 8 }},
		{"slices over the total", "instances[2].slices", func(r *NodeReport) { r.Instances[2].Slices = 5 }},
		{"negative gpu_instance_id", "instances[1].gpu_instance_id", func(r *NodeReport) { r.Instances[1].GPUInstanceID = ptr(-1) }},
		{"slices on a whole GPU", "instances[0].slices", func(r *NodeReport) { r.Instances[0].Slices = 1 }},
		{"MIG GPU without instances has users", "instances[0].users", func(r *NodeReport) { r.Instances[0].TotalSlices = 7 }},
		{"empty instance uuid", "instances[0].uuid", func(r *NodeReport) { r.Instances[0].UUID = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fixture(t)
			tc.change(r)
			err := r.Validate(clock)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *FieldError", err)
			}
			if fe.Path != tc.field {
				t.Fatalf("Validate = %v, want field %s", err, tc.field)
			}
		})
	}
}

// TestNodeReportValidateAccepts: the edges of each bound are valid.
func TestNodeReportValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *NodeReport)
	}{
		{"time exactly 24 h ahead", func(r *NodeReport) { r.Time = clock.Unix() + 86400 }},
		{"interval a day", func(r *NodeReport) { r.IntervalSeconds = 86400 }},
		{"upper-case node of 253 bytes", func(r *NodeReport) { r.Node = strings.Repeat(strings.Repeat("A", 62)+".", 4) + "a" }},
		{"samples 0 throughout", func(r *NodeReport) {
			r.Samples = 0
			for i := range r.Instances {
				r.Instances[i].Samples = 0
			}
		}},
		{"slices fill the GPU", func(r *NodeReport) { r.Instances[2].Slices = 4 }},
		// Re-partitioned mid-interval: 3g+4g for 6 samples, then a 7g for 6.
		{"re-partitioned", func(r *NodeReport) {
			r.Instances[1].Samples, r.Instances[2].Samples = 6, 6
			in := r.Instances[2]
			in.GPUInstanceID, in.Slices, in.Samples = ptr(0), 7, 6
			r.Instances = append(r.Instances, in)
		}},
		{"MIG GPU without instances", func(r *NodeReport) {
			r.Instances[0].TotalSlices, r.Instances[0].Users = 7, nil
		}},
		{"64 instances of 256 users", func(r *NodeReport) {
			r.Instances = r.Instances[:1]
			for len(r.Instances[0].Users) < MaxInstanceUsers {
				r.Instances[0].Users = append(r.Instances[0].Users, r.Instances[0].Users[0])
			}
			for len(r.Instances) < MaxNodeInstances {
				in := r.Instances[0]
				in.UUID = "GPU-" + strings.Repeat("x", len(r.Instances))
				r.Instances = append(r.Instances, in)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fixture(t)
			tc.change(r)
			if err := r.Validate(clock); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzNodeReport: whatever the bytes, Validate does not panic, and a
// report it accepts is accepted again after a JSON round trip.
func FuzzNodeReport(f *testing.F) {
	b, err := os.ReadFile("testdata/node_report.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"schema_version":1,"node":"a","time":1,"interval_seconds":1,"instances":[{"uuid":"G","gpu_instance_id":0,"slices":1,"total_slices":1}]}`))
	f.Add([]byte(`{"instances":[{"uuid":"G","users":[{"allocated_share":1e308}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r NodeReport
		if json.Unmarshal(data, &r) != nil {
			return
		}
		if r.Validate(clock) != nil {
			return
		}
		again, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		var r2 NodeReport
		if err := json.Unmarshal(again, &r2); err != nil {
			t.Fatal(err)
		}
		if err := r2.Validate(clock); err != nil {
			t.Fatalf("valid, then after a round trip: %v", err)
		}
	})
}

// FuzzDecodeNodeReport: whatever the body, DecodeNodeReport and Validate
// answer without panicking, and an error is a *FieldError or a *BodyError.
func FuzzDecodeNodeReport(f *testing.F) {
	b, err := os.ReadFile("testdata/node_report.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"schema_version":1,"node":"a","time":1.5}`))
	f.Add([]byte(`{"instances":[{"users":[{"uid":"x"}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeNodeReport(data)
		if err == nil {
			err = r.Validate(clock)
		}
		if err == nil {
			return
		}
		var fe *FieldError
		var be *BodyError
		if !errors.As(err, &fe) && !errors.As(err, &be) {
			t.Fatalf("%T %v", err, err)
		}
	})
}
