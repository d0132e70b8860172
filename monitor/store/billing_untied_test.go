package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestUntiedOnePass: the untied users' use that tasks may claim (20.2) is
// the same read in one pass over the window's hours as user by user: 40
// pods nobody registered on 10 GPUs of two nodes, over three hours, one
// of them in a MIG instance, with a registered pod beside them (tied, so
// in neither).
func TestUntiedOnePass(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		h := hourT0
		if _, err := register(s, reg("t1", "p", "o", h)); err != nil {
			t.Fatal(err)
		}
		for n := range 2 {
			for end := h + 1800; end <= h+3*3600; end += 1800 {
				r := &wire.NodeReport{SchemaVersion: 1, Node: fmt.Sprintf("untied-%d", n), Time: end, IntervalSeconds: 1800, Samples: 10}
				for g := range 5 {
					in := wire.NodeInstance{UUID: fmt.Sprintf("GPU-%d-%d", n, g), Name: "NVIDIA H200", Samples: 10, BusyShare: 1,
						BusyBasis: "utilization", OccupiedShare: 1}
					if g == 4 {
						id, slices, total := 1, 3, 7
						in.GPUInstanceID, in.Profile, in.Slices, in.TotalSlices = &id, "3g.71gb", slices, total
					}
					for p := range 4 {
						in.Users = append(in.Users, wire.NodeUser{Runtime: "containerd", ContainerID: fmt.Sprintf("c-%d-%d-%d", n, g, p),
							PodUID: fmt.Sprintf("pod-%d-%d-%d", n, g, p), Namespace: fmt.Sprintf("ns-%d", p), AllocatedShare: 0.25,
							SeenShare: 0.25, BusyShare: 1})
					}
					r.Instances = append(r.Instances, in)
				}
				if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
					t.Fatal(err)
				}
			}
		}
		byUser, onePass, err := store.UntiedBothWaysForTest(ctx, s, h, h+3*3600)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(byUser, "\n") + 1; byUser == "" || n != 2*5*4*3 {
			t.Fatalf("%d entries by user, want 120 (2 nodes × 5 GPUs × 4 pods × 3 hours):\n%s", n, byUser)
		}
		if byUser != onePass {
			t.Errorf("by user:\n%s\none pass:\n%s", byUser, onePass)
		}
	})
}
