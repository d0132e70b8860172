package store_test

import (
	"reflect"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestFromWire: what the store keeps of decoded bodies, defaults included
// (a GPU's index is its position, gpu_count the entries, a MIG entry's
// share its slices / total_slices whatever its share says).
func TestFromWire(t *testing.T) {
	body := []byte(`{"task_id":"t","task_name":"n","project":"p","owner":"o","start_time":100,` +
		`"gpus":[{"uuid":"GPU-a","name":"T4","memory_total_bytes":16},{"index":7,"uuid":"GPU-b","share":0.5,` +
		`"mig":{"uuid":"MIG-1","gpu_instance_id":2,"profile":"1g.10gb","slices":1,"total_slices":7}}]}`)
	w, err := wire.DecodeRegistration(body)
	if err != nil {
		t.Fatal(err)
	}
	one, seven := int64(1), int64(7)
	want := &store.Registration{TaskID: "t", TaskName: "n", Project: "p", Owner: "o", StartTime: 100, GPUCount: 2,
		Labels: map[string]string{}, Body: body, GPUs: []store.RegisteredGPU{
			{Index: 0, UUID: "GPU-a", Model: "T4", MemoryTotal: 16},
			{Index: 7, UUID: "GPU-b", Share: 1.0 / 7, MIG: &store.MIG{UUID: "MIG-1", GPUInstanceID: 2, Profile: "1g.10gb", Slices: &one, TotalSlices: &seven}},
		}}
	if got := store.RegistrationOf(w, body); !reflect.DeepEqual(got, want) {
		t.Errorf("registration\n%+v\nwant\n%+v", got, want)
	}

}

// TestHeartbeatIntervalRounded: a sampled heartbeat's interval_seconds
// counts rounded to the second: an idle heartbeat at 1000 with an interval
// of 59.5 s makes the task idle since 1000 − 60 = 940.
func TestHeartbeatIntervalRounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		mustRegister(t, s, reg("t", "p", "o", 100, store.RegisteredGPU{UUID: "GPU-a", Model: "T4", Share: 1}))
		h, err := wire.DecodeHeartbeat([]byte(`{"task_id":"t","interval_seconds":59.5,"gpus":[{"uuid":"GPU-a","samples":3,"util_mean":0}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.HeartbeatSampled(ctx, h, 1000, nil); err != nil {
			t.Fatal(err)
		}
		task, err := s.Task(ctx, "t", "", nil)
		if err != nil || task == nil || task.IdleSince == nil || *task.IdleSince != 940 {
			t.Fatalf("task %+v, %v; want idle since 940", task, err)
		}
	})
}
