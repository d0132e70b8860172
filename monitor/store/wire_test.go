package store_test

import (
	"reflect"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestFromWire: what the store keeps of a decoded registration, defaults
// included (a GPU's index is its position, gpu_count the entries, labels
// {} when absent, a MIG entry's share its slices / total_slices whatever
// its share says, its gpu_instance_id as sent).
func TestFromWire(t *testing.T) {
	body := []byte(`{"task_id":"t","task_name":"n","project":"p","owner":"o","start_time":100,` +
		`"gpus":[{"uuid":"GPU-a","name":"T4","memory_total_bytes":16},{"index":7,"uuid":"GPU-b","share":0.5,` +
		`"mig":{"uuid":"MIG-1","gpu_instance_id":2,"profile":"1g.10gb","slices":1,"total_slices":7}}]}`)
	w, err := wire.DecodeRegistration(body)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		if created, err := s.Register(ctx, w, body, store.Sender{}); err != nil || !created {
			t.Fatalf("register: %v, %v", created, err)
		}
		got, err := s.Task(ctx, "t", "", nil)
		if err != nil || got == nil {
			t.Fatalf("task: %+v, %v", got, err)
		}
		one, seven := int64(1), int64(7)
		wantMIG := &store.MIG{UUID: "MIG-1", GPUInstanceID: 2, Profile: "1g.10gb", Slices: &one, TotalSlices: &seven}
		if got.StartTime != 100 || got.GPUCount != 2 || got.Labels == nil || len(got.Labels) != 0 || len(got.GPUs) != 2 {
			t.Fatalf("task %+v: want start 100, gpu_count 2, labels {}, 2 GPUs", got)
		}
		a, b := got.GPUs[0], got.GPUs[1]
		if a.Index != 0 || a.UUID != "GPU-a" || a.Name != "T4" || a.MemoryTotalBytes != 16 || a.Share != 1 || a.MIG != nil {
			t.Errorf("GPU 0: %+v; want index 0 (its position), T4, 16 bytes, share 1, no MIG", a)
		}
		if b.Index != 7 || b.UUID != "GPU-b" || b.Share != 1.0/7 || !reflect.DeepEqual(b.MIG, wantMIG) {
			t.Errorf("GPU 1: %+v (MIG %+v); want index 7, share 1/7, MIG %+v", b, b.MIG, wantMIG)
		}
	})
}

// TestHeartbeatIntervalRounded: a sampled heartbeat's interval_seconds
// counts rounded to the second: an idle heartbeat at 1000 with an interval
// of 59.5 s makes the task idle since 1000 − 60 = 940.
func TestHeartbeatIntervalRounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		mustRegister(t, s, reg("t", "p", "o", 100, wire.RegisteredGPU{UUID: "GPU-a", Name: "T4", Share: ptrOf(1.0)}))
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
