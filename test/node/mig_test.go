package main

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestOnceMIGActivity: a MIG instance's utilisation is its GPM SM activity
// where the driver supports GPM (from the second sample on: the metric
// needs two); an instance without it is busy by its processes.
func TestOnceMIGActivity(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	pid := startIn(t, "")
	writeState(t, state, "gpm 0/7 73", fmt.Sprintf("proc 0/2 compute %d 4096", pid))
	r := once(t, nodeEnv(state, "FAKE_NVML_MIG_0=7:0:1:17920,2:0:3:72192"), "--interval", "3s", "--sample", "1s")
	if len(r.Instances) != 2 || r.Samples < 2 {
		t.Fatalf("report %+v", r)
	}
	// Instances in GPU instance id order: 2, then 7.
	i2, i7 := r.Instances[0], r.Instances[1]
	if *i7.GPUInstanceID != 7 || i7.UtilMean == nil || *i7.UtilMean != 73 || i7.BusyBasis != "utilization" || i7.BusyShare >= 1 || i7.BusyShare <= 0 {
		t.Errorf("GPM instance (no reading at the first sample, 73 %% after): %+v", i7)
	}
	if *i2.GPUInstanceID != 2 || i2.UtilMean != nil || i2.BusyBasis != "processes" || i2.BusyShare != 1 || len(i2.Users) != 1 {
		t.Errorf("instance without GPM: %+v", i2)
	}
}
