package nodereport

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

func f(v float64) *float64 { return &v }
func mj(v uint64) *uint64  { return &v }

// TestReportFigures: four samples of a whole GPU and a MIG instance, the
// figures computed by hand.
func TestReportFigures(t *testing.T) {
	start := time.Unix(1796132700, 0)
	b := New("gpu-node-17", "v1", start)
	alice := User{Runtime: "containerd", ContainerID: "c1", PodUID: "p1", Namespace: "team-a", Pod: "train-0", Container: "paddle", UID: -1}
	idle := User{Runtime: "containerd", ContainerID: "c2", PodUID: "p2", Namespace: "team-b", Pod: "idle-0", Container: "paddle", UID: -1}
	host := User{Cgroup: "/user.slice", UID: 1000}
	decl := &wire.Declaration{TaskID: "t1", Project: "search", Owner: "alice@example.com"}
	whole := InstanceKey{GPU: "GPU-0", GI: -1}
	mig := InstanceKey{GPU: "GPU-1", GI: 7}
	utils := []float64{0, 50, 100, 0}
	sms := []*float64{nil, f(40), f(150), f(0)} // nil: no process of alice then
	energy0 := []uint64{1000000, 1100000, 1250000, 1400000}
	for i := range 4 {
		o := Observation{GPUs: []GPUReading{{UUID: "GPU-0", EnergyMillijoule: mj(energy0[i])}, {UUID: "GPU-1", EnergyMillijoule: mj(uint64(2000000 + 70000*i))}}}
		w := InstanceReading{Key: whole, Name: "NVIDIA H200", MemoryTotalBytes: 1 << 37, Util: f(utils[i])}
		if sms[i] != nil {
			w.Users = append(w.Users, UserReading{User: alice, Allocated: true, Seen: true, SMUtil: sms[i], UsedBytes: uint64(i) << 30, Declared: decl})
		} else {
			w.Users = append(w.Users, UserReading{User: alice, Allocated: true})
		}
		w.Users = append(w.Users, UserReading{User: idle, Allocated: true})
		o.Instances = append(o.Instances, w)
		m := InstanceReading{Key: mig, MIG: true, Profile: "1g.18gb", Slices: 1, TotalSlices: 7, MIGUUIDs: []string{"MIG-a"}}
		if i >= 2 {
			m.Users = []UserReading{{User: host, Seen: true, UsedBytes: 5}}
		}
		o.Instances = append(o.Instances, m)
		b.Add(o)
	}
	r := b.Report(start.Add(60*time.Second), false)
	if r.Time != 1796132760 || r.IntervalSeconds != 60 || r.Samples != 4 || r.Node != "gpu-node-17" {
		t.Fatalf("header %+v", r)
	}
	// GPU-0: 1,400,000 - 1,000,000 mJ = 400 J; GPU-1: 3 × 70 J = 210 J.
	if len(r.GPUs) != 2 || *r.GPUs[0].EnergyJoules != 400 || *r.GPUs[1].EnergyJoules != 210 {
		t.Fatalf("gpus %+v", r.GPUs)
	}
	w, m := r.Instances[0], r.Instances[1]
	// Utilisation 0, 50, 100, 0: mean 37.5, busy 2 of 4.
	if w.GPUInstanceID != nil || *w.UtilMean != 37.5 || w.BusyShare != 0.5 || w.BusyBasis != "utilization" || w.OccupiedShare != 1 || *w.EnergyJoules != 400 || w.EnergyEstimated {
		t.Errorf("whole GPU %+v", w)
	}
	a, id := w.Users[0], w.Users[1]
	// alice: allocated 4/4, seen 3/4, busy when SM >= 1: 40, 150 -> 2/4;
	// SM mean over her 3 samples with a value, capped: (40+100+0)/3.
	if a.ContainerID != "c1" || a.AllocatedShare != 1 || a.SeenShare != 0.75 || a.BusyShare != 0.5 || math.Abs(*a.SMUtilMean-140.0/3) > 1e-9 || a.UsedMemoryPeakBytes != 3<<30 || *a.Declared != *decl || a.UID != nil {
		t.Errorf("alice %+v", a)
	}
	// The idle container: allocated, never seen, no SM values: busy in
	// the samples where the GPU was (50 and 100 %).
	if id.ContainerID != "c2" || id.AllocatedShare != 1 || id.SeenShare != 0 || id.BusyShare != 0.5 || id.SMUtilMean != nil || id.Declared != nil {
		t.Errorf("idle %+v", id)
	}
	// MIG: no utilisation; busy by processes (2 of 4); energy 210 × 1/7.
	if *m.GPUInstanceID != 7 || m.UtilMean != nil || m.BusyBasis != "processes" || m.BusyShare != 0.5 || m.OccupiedShare != 0.5 || !m.EnergyEstimated || math.Abs(*m.EnergyJoules-30) > 1e-9 {
		t.Errorf("MIG instance %+v", m)
	}
	h := m.Users[0]
	if h.UID == nil || *h.UID != 1000 || h.Cgroup != "/user.slice" || h.SeenShare != 0.5 || h.BusyShare != 0.5 {
		t.Errorf("host user %+v", h)
	}
	// The next interval's energy starts from this one's last reading.
	b.Reset(start.Add(60 * time.Second))
	b.Add(Observation{GPUs: []GPUReading{{UUID: "GPU-0", EnergyMillijoule: mj(1500000)}, {UUID: "GPU-1", EnergyMillijoule: mj(10)}}})
	r = b.Report(start.Add(120*time.Second), true)
	if *r.GPUs[0].EnergyJoules != 100 || r.GPUs[1].EnergyJoules != nil || !r.Final || r.IntervalSeconds != 60 {
		t.Errorf("second interval: %+v %+v", r.GPUs[0], r.GPUs[1])
	}
}

// TestReportLimits: 300 users on each of 80 instances stay within the
// wire's limits.
func TestReportLimits(t *testing.T) {
	b := New("n", "v", time.Unix(0, 0))
	var o Observation
	for g := range 80 {
		in := InstanceReading{Key: InstanceKey{GPU: "GPU-" + string(rune('A'+g/26)) + string(rune('a'+g%26)), GI: -1}}
		for u := range 300 {
			in.Users = append(in.Users, UserReading{User: User{Cgroup: "/user.slice/a-very-long-cgroup-path-to-fill-the-body/" + string(rune(u)), UID: int64(u)}, Seen: true})
		}
		o.Instances = append(o.Instances, in)
	}
	b.Add(o)
	r := b.Report(time.Unix(60, 0), false)
	body, _ := json.Marshal(r)
	if len(r.Instances) != wire.MaxNodeInstances || len(body) > wire.MaxNodeReportBytes {
		t.Fatalf("%d instances, %d bytes", len(r.Instances), len(body))
	}
	for _, in := range r.Instances {
		if len(in.Users) > wire.MaxInstanceUsers {
			t.Fatalf("%d users", len(in.Users))
		}
	}
}

func TestTiling(t *testing.T) {
	iv := 60 * time.Second
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	if got := NextEnd(at(1796132701), iv); got.Unix() != 1796132760 {
		t.Errorf("NextEnd = %d", got.Unix())
	}
	if got := NextEnd(at(1796132760), iv); got.Unix() != 1796132820 {
		t.Errorf("NextEnd at an end = %d", got.Unix())
	}
	cases := []struct {
		now, last int64
		have      bool
		want      int64
	}{
		{1796132790, 1796132760, true, 1796132760}, // restart within an interval: no hole
		{1796132900, 1796132760, true, 1796132900}, // longer down: from now
		{1796132790, 0, false, 1796132790},         // first start
		{1796132790, 1796132800, true, 1796132790}, // a last report in the future: ignored
	}
	for _, c := range cases {
		if got := FirstStart(at(c.now), iv, at(c.last), c.have); got.Unix() != c.want {
			t.Errorf("FirstStart(%d, %d, %v) = %d, want %d", c.now, c.last, c.have, got.Unix(), c.want)
		}
	}
}

// TestReportRepartitioned: a GPU in MIG mode without instances, then
// partitioned within the interval, is reported by its instances alone
// (a GPU is whole or in MIG mode within one report), each with the
// samples in which it existed.
func TestReportRepartitioned(t *testing.T) {
	b := New("n", "v", time.Unix(0, 0))
	none := InstanceReading{Key: InstanceKey{GPU: "GPU-0", GI: -1}, MIG: true, TotalSlices: 7}
	gi := InstanceReading{Key: InstanceKey{GPU: "GPU-0", GI: 2}, MIG: true, Slices: 3, TotalSlices: 7}
	b.Add(Observation{Instances: []InstanceReading{none}})
	b.Add(Observation{Instances: []InstanceReading{gi}})
	b.Add(Observation{Instances: []InstanceReading{gi}})
	r := b.Report(time.Unix(60, 0), false)
	if len(r.Instances) != 1 || *r.Instances[0].GPUInstanceID != 2 || r.Instances[0].Samples != 2 || r.Samples != 3 {
		t.Fatalf("instances %+v", r.Instances)
	}
}

// TestReportText: names from the kernel or a runtime with control
// characters or over 1 KiB are made safe for the monitor.
func TestReportText(t *testing.T) {
	b := New("n", "v", time.Unix(0, 0))
	long := strings.Repeat("é", 600) // 1200 bytes
	b.Add(Observation{Instances: []InstanceReading{{Key: InstanceKey{GPU: "GPU-0", GI: -1},
		Users: []UserReading{{User: User{Cgroup: "/user.slice/a\nb\x7f" + long, UID: 7}, Seen: true}}}}})
	u := b.Report(time.Unix(60, 0), false).Instances[0].Users[0]
	if !strings.HasPrefix(u.Cgroup, "/user.slice/a?b?é") || len(u.Cgroup) > MaxTextBytes || !utf8.ValidString(u.Cgroup) {
		t.Errorf("cgroup %q (%d bytes)", u.Cgroup, len(u.Cgroup))
	}
}
