package store_test

import (
	"encoding/json"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// done completes id as run from start to end.
func done(t *testing.T, s *store.Store, id string, start, end int64) {
	t.Helper()
	c := &wire.Completion{TaskID: id, StartTime: &start, EndTime: &end, DurationSeconds: ptrOf(float64(end - start)), ExitCode: ptrOf[int64](0)}
	b, _ := json.Marshal(c)
	mustComplete(t, s, c, b)
}

// TestShareOverlaps: claims on one GPU instance whose declared shares add
// up to more than 1 at one instant are listed, each instant once, with its
// tasks; a sum of exactly 1, claims ended by the claim rule, and MIG
// instances of one GPU (each held at its own share) are not. On both
// stores.
func TestShareOverlaps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		shared := func(share float64) wire.RegisteredGPU {
			return wire.RegisteredGPU{UUID: "GPU-s", Name: "NVIDIA H100", Share: ptrOf(share)}
		}
		// GPU-s, time-sliced: a and b at 0.5 from 1000 and 2000 (1.0:
		// fine), c at 0.25 from 3000 to 4000 (1.25: over), d at 0.5 from
		// 7000 after a and b ended (0.5).
		for _, x := range []struct {
			id         string
			share      float64
			start, end int64
		}{{"a", 0.5, 1000, 5000}, {"b", 0.5, 2000, 6000}, {"c", 0.25, 3000, 4000}, {"d", 0.5, 7000, 8000}} {
			mustRegister(t, s, reg(x.id, "p", "o", x.start, shared(x.share)))
			done(t, s, x.id, x.start, x.end)
		}
		// GPU-m: seven 1g instances, one task each, all at once: 7/7 of
		// the GPU but one instance each, never more than 1/7 on one.
		one, seven := int64(1), int64(7)
		for gi := range int64(7) {
			id := "mig-" + string(rune('0'+gi))
			mustRegister(t, s, reg(id, "p", "o", 1000+gi, wire.RegisteredGPU{UUID: "GPU-m", Name: "NVIDIA H200",
				MIG: &wire.MIG{UUID: "MIG-" + id, GPUInstanceID: ptrOf[int64](gi), Profile: "1g.18gb", Slices: &one, TotalSlices: &seven}}))
			done(t, s, id, 1000+gi, 5000)
		}
		// GPU-w: a whole-GPU task, then a shared one that ends its claim
		// (the claim rule): 1 then 0.5, never 1.5 at once.
		mustRegister(t, s, reg("w1", "p", "o", 1000, wire.RegisteredGPU{UUID: "GPU-w", Name: "NVIDIA H100", Share: ptrOf(1.0)}))
		mustRegister(t, s, reg("w2", "p", "o", 2000, wire.RegisteredGPU{UUID: "GPU-w", Name: "NVIDIA H100", Share: ptrOf(0.5)}))
		done(t, s, "w1", 1000, 4000)
		done(t, s, "w2", 2000, 4000)

		for _, c := range []struct {
			from, at int64
		}{{0, 3000}, {3500, 3500}} {
			got, err := s.ShareOverlaps(ctx, facts.Window{From: time.Unix(c.from, 0), To: time.Unix(10000, 0)})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("from %d: %d overlaps, want 1: %+v", c.from, len(got), got)
			}
			o := got[0]
			if o.UUID != "GPU-s" || o.GPUInstanceID != nil || o.At != c.at || o.Total != 1.25 || len(o.Tasks) != 3 ||
				o.Tasks[0].TaskID != "a" || o.Tasks[1].TaskID != "b" || o.Tasks[2].TaskID != "c" || o.Tasks[2].Share != 0.25 {
				t.Errorf("from %d: %+v; want GPU-s at %d, 1.25 of a, b and c", c.from, o, c.at)
			}
		}
		if got, err := s.ShareOverlaps(ctx, facts.Window{From: time.Unix(4000, 0), To: time.Unix(10000, 0)}); err != nil || len(got) != 0 {
			t.Errorf("after c ended: %+v, %v; want none", got, err)
		}
	})
}
