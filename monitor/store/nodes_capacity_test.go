package store_test

import (
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// TestRollupCapacityShare: a user with capacity_share c is attributed at
// most c·w·d of the instance's occupied time; the rest is unallocated, the
// same under both split rules (NODE.md 12.12).
func TestRollupCapacityShare(t *testing.T) {
	tests := []struct {
		name  string
		users []wire.NodeUser
		// want each user's Equal (= Util) seconds over the hour and the
		// GPU's unallocated seconds, by hand.
		want        []float64
		wantUtil    []float64 // nil: as want
		unallocated float64
	}{
		{name: "a 30 % share alone: 0.3 × 3600, 0.7 unallocated",
			users: []wire.NodeUser{{PodUID: "p1", AllocatedShare: 1, SeenShare: 1, CapacityShare: ptrOf(0.3), SMUtilMean: ptrOf(80.0)}},
			want:  []float64{1080}, unallocated: 2520},
		{name: "two DRA shares of 0.25 and 0.5: the presence split (1800 each) capped at 900 and 1800",
			users: []wire.NodeUser{
				{PodUID: "p1", AllocatedShare: 1, CapacityShare: ptrOf(0.25), SMUtilMean: ptrOf(90.0)},
				{PodUID: "p2", AllocatedShare: 1, CapacityShare: ptrOf(0.5), SMUtilMean: ptrOf(10.0)}},
			want: []float64{900, 1800}, unallocated: 900},
		{name: "time-sliced halves: 1/2 each, nothing left",
			users: []wire.NodeUser{
				{PodUID: "p1", AllocatedShare: 1, CapacityShare: ptrOf(0.5)},
				{PodUID: "p2", AllocatedShare: 1, CapacityShare: ptrOf(0.5)}},
			want: []float64{1800, 1800}, unallocated: 0},
		{name: "a share beside a whole-device user without one: only the share is capped",
			users: []wire.NodeUser{
				{PodUID: "p1", AllocatedShare: 1, CapacityShare: ptrOf(0.1)},
				{PodUID: "p2", SeenShare: 1}},
			want: []float64{360, 1800}, unallocated: 1440},
		{name: "a share of 1 changes nothing",
			users: []wire.NodeUser{{PodUID: "p1", AllocatedShare: 1, CapacityShare: ptrOf(1.0)}},
			want:  []float64{3600}, unallocated: 0},
		{name: "a whole DRA device keeps the util rule: 3:1 by sm_util_mean",
			users: []wire.NodeUser{{PodUID: "p1", AllocatedShare: 1, CapacityShare: ptrOf(1.0), SMUtilMean: ptrOf(60.0)},
				{PodUID: "p2", SeenShare: 1, SMUtilMean: ptrOf(20.0)}},
			want: []float64{1800, 1800}, wantUtil: []float64{2700, 900}, unallocated: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := wholeReport("n", hourT0+3600, 3600, "GPU-a")
			r.Instances[0].Users = tc.users
			if err := r.Validate(time.Unix(hourT0+3600, 0)); err != nil {
				t.Fatal(err)
			}
			gpus, users := store.Rollup(r, hourT0, hourT0+3600)
			if len(gpus) != 1 || len(users) != len(tc.want) {
				t.Fatalf("%d GPU hours and %d user hours, want 1 and %d", len(gpus), len(users), len(tc.want))
			}
			if abs(gpus[0].Unallocated-tc.unallocated) > 1e-6 {
				t.Errorf("unallocated %v s, want %v", gpus[0].Unallocated, tc.unallocated)
			}
			sum := gpus[0].Unallocated
			for i, u := range users {
				wantUtil := tc.want
				if tc.wantUtil != nil {
					wantUtil = tc.wantUtil
				}
				if abs(u.Equal-tc.want[i]) > 1e-6 || abs(u.Util-wantUtil[i]) > 1e-6 {
					t.Errorf("user %s: equal %v util %v, want %v and %v", u.User.PodUID, u.Equal, u.Util, tc.want[i], wantUtil[i])
				}
				sum += u.Equal
			}
			if abs(sum-3600) > 1e-6 {
				t.Errorf("unallocated + users = %v, want 3600 (the ledger's check)", sum)
			}
		})
	}
}
