package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// roundTrip: an accepted body re-encodes, and that decodes and checks
// again to the same value (what the store does with a pending completion,
// and what a sender's own encoding must survive).
func roundTrip[T any](t *testing.T, v *T, decodeFn func([]byte) (*T, error)) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("an accepted body does not encode: %v", err)
	}
	again, err := decodeFn(b)
	if err != nil {
		t.Fatalf("an accepted body, encoded again, is refused: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(v, again) {
		t.Fatalf("decoded differently after encoding:\n%+v\n%+v\n%s", v, again, b)
	}
}

// refusal: a refusal is a *FieldError naming a field or a *BodyError.
func refusal(t *testing.T, err error) {
	t.Helper()
	var fe *FieldError
	var be *BodyError
	switch {
	case errors.As(err, &fe):
		if fe.Path == "" || fe.Rule == "" {
			t.Fatalf("a field error without a path or a rule: %q", err)
		}
	case errors.As(err, &be):
	default:
		t.Fatalf("a refusal that names no field: %T %v", err, err)
	}
}

func seeds(f *testing.F, name string, more ...string) {
	b, err := readFileErr(name)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, m := range more {
		f.Add([]byte(m))
	}
}

// FuzzRegistration: whatever comes in, decoding never panics, a refusal
// names a field or the body, an accepted registration holds only values
// that follow the name rule (nothing can forge a label, a line or a key
// downstream) and survives encoding again.
func FuzzRegistration(f *testing.F) {
	seeds(f, "registration.json",
		`{"task_id":"a","task_name":"b","project":"c","owner":"d","start_time":1}`,
		`{"task_id":"a\n","task_name":"b","project":"c\"","owner":"d","start_time":-1}`,
		`{"task_id":"a","task_name":"b","project":"c","owner":"d","start_time":1,"labels":{"x":null},"gpus":[{"mig":{"uuid":"M","gpu_instance_id":1,"slices":9,"total_slices":7}}]}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRegistration(b)
		if err != nil {
			refusal(t, err)
			return
		}
		for _, v := range []string{r.TaskID, r.TaskName, r.Project} {
			if !ValidName(v, "") {
				t.Fatalf("accepted %q", v)
			}
		}
		if !ValidName(r.Owner, "@+") {
			t.Fatalf("accepted owner %q", r.Owner)
		}
		for k, v := range r.Labels {
			if !ValidName(k, "") || !ValidName(v, "") {
				t.Fatalf("accepted label %q=%q", k, v)
			}
		}
		if len(r.GPUs) > MaxGPUList || r.Count() > MaxGPUCount || *r.StartTime > MaxUnix {
			t.Fatalf("accepted out of bounds: %d GPUs, count %d, start %d", len(r.GPUs), r.Count(), *r.StartTime)
		}
		roundTrip(t, r, DecodeRegistration)
	})
}

// FuzzCompletion: as FuzzRegistration, for completions.
func FuzzCompletion(f *testing.F) {
	seeds(f, "completion.json",
		`{"task_id":"a","end_time":5,"duration_seconds":1,"exit_code":0,"signal":null,"gpus":null}`,
		`{"task_id":"a","end_time":5,"duration_seconds":1,"exit_code":0,"gate":{"expr":"x","passed":false},"metrics":{"a":1e308}}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCompletion(b)
		if err != nil {
			refusal(t, err)
			return
		}
		if !ValidName(c.TaskID, "") || *c.ExitCode < 0 || *c.ExitCode > MaxExitCode || len(c.Metrics) > MaxMetrics {
			t.Fatalf("accepted %+v", c)
		}
		roundTrip(t, c, DecodeCompletion)
	})
}

// FuzzHeartbeat: as FuzzRegistration, for heartbeats.
func FuzzHeartbeat(f *testing.F) {
	seeds(f, "heartbeat.json",
		`{"task_id":"a"}`,
		`{"task_id":"a","time":"5","gpus":[{"uuid":null,"samples":1}]}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeartbeat(b)
		if err != nil {
			refusal(t, err)
			return
		}
		if !ValidName(h.TaskID, "") || len(h.GPUs) > MaxGPUList {
			t.Fatalf("accepted %+v", h)
		}
		roundTrip(t, h, DecodeHeartbeat)
	})
}
