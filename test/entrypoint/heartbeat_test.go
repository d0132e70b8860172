package entrypoint

// Black-box tests of the heartbeat's GPU samples (docs/supervise.md): with
// sampling on, each heartbeat says how busy each GPU was over its own
// interval, so the monitor sees idle GPUs while they are idle.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"syscall"
	"testing"
	"time"
)

// hbGPU is one entry of a heartbeat's gpus; MIG is set when the key is
// there at all.
type hbGPU struct {
	UUID     string   `json:"uuid"`
	MIGUUID  *string  `json:"mig_uuid"`
	Samples  int      `json:"samples"`
	UtilMean *float64 `json:"util_mean"`
}

type hbBody struct {
	keys     []string
	rawGPUs  string   // gpus as sent
	TaskID   string   `json:"task_id"`
	Time     int64    `json:"time"`
	Interval *float64 `json:"interval_seconds"`
	GPUs     []hbGPU  `json:"gpus"`
}

// heartbeats decodes the heartbeats m received, in order, with their keys.
func heartbeats(t *testing.T, m *supMonitor) []hbBody {
	t.Helper()
	var out []hbBody
	for _, r := range m.requests("/v1/task/heartbeat") {
		var b hbBody
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(r.Body, &raw); err != nil {
			t.Fatalf("heartbeat %s: %v", r.Body, err)
		}
		json.Unmarshal(r.Body, &b)
		for k := range raw {
			b.keys = append(b.keys, k)
		}
		slices.Sort(b.keys)
		b.rawGPUs = string(raw["gpus"])
		out = append(out, b)
	}
	return out
}

// cycleMean is the mean of values seq[from], seq[from+1], ... (n of them,
// seq taken cyclically): what the fake NVML answers a device's calls
// from..from+n-1.
func cycleMean(seq []float64, from, n int) float64 {
	var sum float64
	for k := from; k < from+n; k++ {
		sum += seq[k%len(seq)]
	}
	return sum / float64(n)
}

func TestSuperviseHeartbeatGPUSamples(t *testing.T) {
	// GPU 0 answers 10, 20, 60, 10, ... and GPU 1 always 0 %: each
	// heartbeat's means follow from how many samples each interval took,
	// since the intervals tile the sampler's stream.
	m := newSupMonitor(t)
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 2")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_TASK_ID", "hb-gpu-1")
	k.Setenv("PADDLE_GPU_SAMPLE", "50ms")
	k.Setenv("PADDLE_HEARTBEAT", "400ms")
	k.Setenv("FAKE_NVML_UTIL_0", "10,20,60")
	k.Setenv("FAKE_NVML_UTIL_1", "0")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	hbs := heartbeats(t, m)
	if len(hbs) < 2 {
		t.Fatalf("%d heartbeats in a 2s run every 400ms", len(hbs))
	}
	var comp struct {
		Duration float64 `json:"duration_seconds"`
		GPUs     []struct {
			Samples int `json:"samples"`
		} `json:"gpus"`
	}
	json.Unmarshal(m.waitFor(t, "/v1/task/complete", 1)[0].Body, &comp)
	seq := []float64{10, 20, 60}
	from, total := 0, 0.0
	for i, h := range hbs {
		if want := []string{"gpus", "interval_seconds", "task_id", "time"}; !slices.Equal(h.keys, want) {
			t.Errorf("heartbeat %d keys %q, want %q", i, h.keys, want)
		}
		if h.TaskID != "hb-gpu-1" || h.Interval == nil || len(h.GPUs) != 2 {
			t.Fatalf("heartbeat %d: %+v", i, h)
		}
		// Ticks every 400ms, from the command's start; a loaded machine
		// may deliver one late, never early.
		if *h.Interval < 0.39 {
			t.Errorf("heartbeat %d: interval_seconds %v, want about 0.4", i, *h.Interval)
		}
		total += *h.Interval
		g0, g1 := h.GPUs[0], h.GPUs[1]
		if g0.UUID != fakeUUID(0) || g1.UUID != fakeUUID(1) || g0.MIGUUID != nil || g1.MIGUUID != nil {
			t.Errorf("heartbeat %d gpus %+v, want the task's GPUs in order, no mig_uuid", i, h.GPUs)
		}
		// Each sample line reads both GPUs: one count for both.
		n := g0.Samples
		if g1.Samples != n {
			t.Errorf("heartbeat %d: %d and %d samples", i, n, g1.Samples)
		}
		if n == 0 {
			if g0.UtilMean != nil || g1.UtilMean != nil {
				t.Errorf("heartbeat %d: no sample, util_mean %v %v", i, g0.UtilMean, g1.UtilMean)
			}
			continue
		}
		if g0.UtilMean == nil || math.Abs(*g0.UtilMean-cycleMean(seq, from, n)) > 1e-9 {
			t.Errorf("heartbeat %d: %d samples from the %d-th, util_mean %v, want %v", i, n, from, g0.UtilMean, cycleMean(seq, from, n))
		}
		if g1.UtilMean == nil || *g1.UtilMean != 0 {
			t.Errorf("heartbeat %d: idle GPU's util_mean %v, want 0", i, g1.UtilMean)
		}
		t.Logf("heartbeat %d: %.3f s, %d samples, util_mean %.4g", i, *h.Interval, n, *g0.UtilMean)
		from += n
	}
	if from == 0 {
		t.Error("no heartbeat carried a sample")
	}
	// The intervals tile the run up to the last heartbeat; the samples
	// after it go to the completion only.
	if total > comp.Duration+0.01 {
		t.Errorf("intervals add up to %v s, the command ran %v s", total, comp.Duration)
	}
	if len(comp.GPUs) != 2 || comp.GPUs[0].Samples < from {
		t.Errorf("completion gpus %+v, heartbeats counted %d samples", comp.GPUs, from)
	}
}

func TestSuperviseHeartbeatWithoutSamples(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  []string
		// wantGPUs: gpus and interval_seconds are in every heartbeat.
		wantGPUs bool
	}{
		// Sampling on, but the driver has no utilisation: every entry
		// says so, with no sample and a null mean.
		{"no utilisation in the driver", []string{"PADDLE_GPU_SAMPLE", "50ms", "LD_LIBRARY_PATH", ""}, true},
		// A sampler that cannot start (a driver that hangs at once).
		{"sampler hangs", []string{"PADDLE_GPU_SAMPLE", "50ms", "FAKE_NVML_SAMPLE_MODE", "hang"}, true},
		// Sampling off: the heartbeat is {task_id, time}.
		{"sampling off", []string{"PADDLE_GPU_SAMPLE", "0"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newSupMonitor(t)
			k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1")
			k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_HEARTBEAT", "200ms")
			for i := 0; i < len(tt.env); i += 2 {
				v := tt.env[i+1]
				if tt.env[i] == "LD_LIBRARY_PATH" {
					v = fakeNVMLNoUtilDir(t)
				}
				k.Setenv(tt.env[i], v)
			}
			if r := k.Run(); r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			hbs := heartbeats(t, m)
			if len(hbs) < 2 {
				t.Fatalf("%d heartbeats", len(hbs))
			}
			for i, h := range hbs {
				if !tt.wantGPUs {
					if want := []string{"task_id", "time"}; !slices.Equal(h.keys, want) {
						t.Errorf("heartbeat %d keys %q, want %q", i, h.keys, want)
					}
					continue
				}
				want := fmt.Sprintf(`[{"uuid":%q,"samples":0,"util_mean":null},{"uuid":%q,"samples":0,"util_mean":null}]`, fakeUUID(0), fakeUUID(1))
				if h.rawGPUs != want || h.Interval == nil || *h.Interval <= 0 {
					t.Errorf("heartbeat %d: interval %v gpus %s\nwant %s", i, h.Interval, h.rawGPUs, want)
				}
			}
		})
	}
}

func TestSuperviseHeartbeatToHangingMonitor(t *testing.T) {
	// Heartbeats that never get an answer: signals still reach the
	// command at once, and the end is not held up past the budget.
	m := newSupMonitor(t).answer("/v1/task/heartbeat", "hang")
	k := gpuTask(t, 1, bin.sigcatch)
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "50ms")
	k.Setenv("PADDLE_HEARTBEAT", "100ms")
	k.Setenv("PADDLE_COMPLETE_BUDGET", "1s")
	k.Setenv("SIGCATCH_TERM_EXIT", "7")
	l := startLive(t, k.Command(context.Background()))
	child := readyPID(l)
	m.waitFor(t, "/v1/task/heartbeat", 1)
	sent := time.Now()
	syscall.Kill(l.cmd.Process.Pid, syscall.SIGUSR1)
	if line, want := l.next(), fmt.Sprintf("%d %d", child, syscall.SIGUSR1); line != want {
		t.Fatalf("command printed %q, want %q", line, want)
	}
	if d := time.Since(sent); d > 2*time.Second {
		t.Errorf("SIGUSR1 reached the command %v after it was sent, a heartbeat in flight", d)
	}
	syscall.Kill(l.cmd.Process.Pid, syscall.SIGTERM)
	l.next()
	ended := time.Now()
	if code := l.wait(); code != 7 {
		t.Errorf("exit %d, want the command's 7\n%s", code, l.stderr.String())
	}
	if d := time.Since(ended); d > time.Second+regMargin {
		t.Errorf("exited %v after the command, with a 1s completion budget", d)
	}
	if n := len(m.requests("/v1/task/complete")); n != 1 {
		t.Errorf("%d completions, want 1", n)
	}
}

func TestSuperviseHeartbeatMIG(t *testing.T) {
	// GPU 0 cut into three MIG instances (no NVML utilisation there), GPU 1
	// whole at 0, 50, 0, ...: each instance is its own entry with its
	// parent's uuid and its mig_uuid, without samples; GPU 1 has no
	// mig_uuid and the interval's mean.
	m := newSupMonitor(t)
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1.2")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "50ms")
	k.Setenv("PADDLE_HEARTBEAT", "300ms")
	k.Setenv("FAKE_NVML_MIG_0", h200MIG)
	k.Setenv("FAKE_NVML_MIG_1", "off")
	k.Setenv("FAKE_NVML_UTIL_1", "0,50")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	hbs := heartbeats(t, m)
	if len(hbs) < 2 {
		t.Fatalf("%d heartbeats", len(hbs))
	}
	from := 0
	for i, h := range hbs {
		var entries []json.RawMessage
		json.Unmarshal([]byte(h.rawGPUs), &entries)
		if len(entries) != 4 {
			t.Fatalf("heartbeat %d gpus %s, want 3 MIG instances and GPU 1", i, h.rawGPUs)
		}
		for j, gi := range []int{7, 8, 2} {
			want := fmt.Sprintf(`{"uuid":%q,"mig_uuid":%q,"samples":0,"util_mean":null}`, fakeUUID(0), migUUID(0, gi, 0))
			if string(entries[j]) != want {
				t.Errorf("heartbeat %d entry %d %s\nwant %s", i, j, entries[j], want)
			}
		}
		g := h.GPUs[3]
		if g.UUID != fakeUUID(1) || g.MIGUUID != nil {
			t.Errorf("heartbeat %d: whole GPU entry %s", i, entries[3])
		}
		if g.Samples == 0 {
			continue
		}
		if want := cycleMean([]float64{0, 50}, from, g.Samples); g.UtilMean == nil || math.Abs(*g.UtilMean-want) > 1e-9 {
			t.Errorf("heartbeat %d: %d samples from the %d-th, util_mean %v, want %v", i, g.Samples, from, g.UtilMean, want)
		}
		from += g.Samples
	}
	if from == 0 {
		t.Error("no heartbeat carried a sample of GPU 1")
	}
}
