package textfile

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

func task() (*labels.Set, []gpu.Device) {
	s := &labels.Set{TaskID: "job-7", TaskName: "resnet50", Project: "视觉", Owner: "ann@example.com",
		Priority: "high", Hostname: "node-3", StartTime: 1732950000,
		Identity: labels.Identity{Pipeline: "ocr", Step: "eval"}}
	return s, []gpu.Device{
		{Index: 0, UUID: "GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b5", Name: "NVIDIA H100 80GB HBM3"},
		{Index: 1, Name: ""}, // counted from a device node: no UUID, no series
		{Index: 2, UUID: "GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", Name: `Tesla "T4"`},
	}
}

const golden = `# HELP paddle_task_info Labels of a task started by paddle-entrypoint; always 1.
# TYPE paddle_task_info gauge
paddle_task_info{task_id="job-7",task_name="resnet50",project="视觉",owner="ann@example.com",priority="high",env="",pipeline="ocr",step="eval",hostname="node-3"} 1
# HELP paddle_task_gpu_info One series per GPU of a task, by the GPU's UUID as dcgm-exporter labels it; always 1.
# TYPE paddle_task_gpu_info gauge
paddle_task_gpu_info{task_id="job-7",project="视觉",owner="ann@example.com",hostname="node-3",UUID="GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b5",gpu_model="NVIDIA H100 80GB HBM3"} 1
paddle_task_gpu_info{task_id="job-7",project="视觉",owner="ann@example.com",hostname="node-3",UUID="GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",gpu_model="Tesla \"T4\""} 1
# HELP paddle_task_gpu_share The fraction of the physical GPU the task holds on this GPU (instance): 1 for a whole GPU, slices / total slices for a MIG instance, the platform's share for a time-sliced or MPS GPU.
# TYPE paddle_task_gpu_share gauge
paddle_task_gpu_share{task_id="job-7",project="视觉",owner="ann@example.com",UUID="GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b5",GPU_I_ID=""} 1
paddle_task_gpu_share{task_id="job-7",project="视觉",owner="ann@example.com",UUID="GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",GPU_I_ID=""} 1
# HELP paddle_task_start_time_seconds When the task started, in Unix seconds.
# TYPE paddle_task_start_time_seconds gauge
paddle_task_start_time_seconds{task_id="job-7"} 1.73295e+09
`

func TestRender(t *testing.T) {
	s, gpus := task()
	got, err := Render(s, gpus)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != golden {
		t.Errorf("Render =\n%s\nwant\n%s", got, golden)
	}
	// No GPU: no GPU family at all (an empty family has no HELP to give).
	got, _ = Render(s, nil)
	if strings.Contains(string(got), GPUInfoName) || !strings.Contains(string(got), "paddle_task_start_time_seconds{task_id=\"job-7\"}") {
		t.Errorf("Render without GPUs =\n%s", got)
	}
}

func TestLabelNamesAreLegacyValid(t *testing.T) {
	for _, names := range [][]string{infoLabels, gpuInfoLabels, startLabels, gpuShareLabels} {
		if names[0] != "task_id" {
			t.Errorf("%v: task_id is not the first label", names)
		}
		for _, n := range names {
			if !model.LegacyValidation.IsValidLabelName(n) {
				t.Errorf("label name %q is not valid under the legacy rules node_exporter applies", n)
			}
		}
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	s, gpus := task()
	path, err := Write(dir, s, gpus)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "paddle-task-job-7.prom") {
		t.Errorf("path = %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != golden {
		t.Errorf("file = %q, %v", b, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
	// Rewriting replaces it.
	s.Priority = "low"
	if _, err := Write(dir, s, nil); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.Contains(string(b), `priority="low"`) || strings.Contains(string(b), GPUInfoName) {
		t.Errorf("rewritten file = %s", b)
	}
	if err := Remove(dir, "job-7"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("file still there after Remove: %v", err)
	}
	if err := Remove(dir, "job-7"); err != nil {
		t.Errorf("Remove of a file already gone: %v", err)
	}
}

func TestWriteFaults(t *testing.T) {
	s, _ := task()
	if _, err := Write(filepath.Join(t.TempDir(), "missing"), s, nil); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
	bad := *s
	bad.TaskID = "../x"
	dir := t.TempDir()
	if _, err := Write(dir, &bad, nil); err == nil || !strings.Contains(err.Error(), "task id") {
		t.Errorf("task id ../x: err = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d entries", len(entries))
	}
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	mine := "GPU-aaaa"
	write := func(id, uuid string) string {
		s := &labels.Set{TaskID: id, TaskName: "t", Project: "p", Owner: "o", Hostname: "h", StartTime: 1}
		var gpus []gpu.Device
		if uuid != "" {
			gpus = []gpu.Device{{UUID: uuid, Name: "m"}}
		}
		p, err := Write(dir, s, gpus)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := write("old-task", mine)
	other := write("other-task", "GPU-bbbb")
	cpu := write("cpu-task", "")
	own := write("me", mine)
	junk := filepath.Join(dir, "paddle-task-junk.prom")
	os.WriteFile(junk, []byte("paddle_task_gpu_info{UUID=\"GPU-aaaa\" 1\n"), 0o644) // unparseable
	foreign := filepath.Join(dir, "gpu.prom")
	os.WriteFile(foreign, []byte("paddle_task_gpu_info{UUID=\"GPU-aaaa\"} 1\n"), 0o644) // not ours by name
	fifo := filepath.Join(dir, "paddle-task-fifo.prom")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var got []Stale
	var err error
	go func() { got, err = RemoveStale(dir, "me", []gpu.Device{{UUID: "GPU-zzzz"}, {UUID: mine}}); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("RemoveStale hung (on the FIFO?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != stale || got[0].UUID != mine || got[0].Err != nil {
		t.Errorf("RemoveStale = %+v, want only %s removed", got, stale)
	}
	for _, p := range []string{other, cpu, own, junk, foreign, fifo} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale file still there")
	}
	if got, err := RemoveStale(filepath.Join(dir, "missing"), "me", []gpu.Device{{UUID: mine}}); err == nil {
		t.Errorf("missing directory: %v, no error", got)
	}
	if got, err := RemoveStale(dir, "me", nil); got != nil || err != nil {
		t.Errorf("no GPUs: %v, %v", got, err)
	}
}

func TestPromtoolChecksTheFile(t *testing.T) {
	promtool := harness.Tool(t, "promtool")
	dir := t.TempDir()
	s, gpus := task()
	path, err := Write(dir, s, gpus)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestNodeExporterReadsTheFile starts a real node_exporter with only the
// textfile collector on our directory and scrapes it.
func TestNodeExporterReadsTheFile(t *testing.T) {
	exporter := harness.Tool(t, "prometheus-node-exporter")
	dir := t.TempDir()
	s, gpus := task()
	if _, err := Write(dir, s, gpus); err != nil {
		t.Fatal(err)
	}
	// A second task on another GPU: same families, same HELP, no conflict.
	s2 := &labels.Set{TaskID: "job-8", TaskName: "bert", Project: "nlp", Owner: "bob", Hostname: "node-3", StartTime: 1732950100}
	if _, err := Write(dir, s2, []gpu.Device{{UUID: "GPU-cccc", Name: "NVIDIA A100"}}); err != nil {
		t.Fatal(err)
	}
	// A MIG task: its series have GPU_I_ID and GPU_I_PROFILE, which the
	// other files' series lack (Prometheus reads an absent label as empty):
	// no scrape error.
	s3, migs := migTask()
	if _, err := Write(dir, s3, migs); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, exporter, "--web.listen-address="+addr,
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	fams := scrape(t, "http://"+addr+"/metrics", &logs)

	if v := fams["node_textfile_scrape_error"].GetMetric(); len(v) != 1 || v[0].GetGauge().GetValue() != 0 {
		t.Errorf("node_textfile_scrape_error = %v, want 0\nlogs:\n%s", v, logs.String())
	}
	want := map[string][]string{
		InfoName: {
			`env="",hostname="node-3",owner="ann@example.com",pipeline="ocr",priority="high",project="视觉",step="eval",task_id="job-7",task_name="resnet50" 1`,
			`env="",hostname="node-3",owner="bob",pipeline="",priority="",project="nlp",step="",task_id="job-8",task_name="bert" 1`,
			`env="",hostname="node-3",owner="cy",pipeline="",priority="",project="nlp",step="",task_id="job-9",task_name="llm" 1`,
		},
		GPUInfoName: {
			`GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-66666666-7777-8888-9999-000000000000",gpu_model="NVIDIA H200",hostname="node-3",owner="cy",project="nlp",task_id="job-9" 1`,
			`GPU_I_ID="2",GPU_I_PROFILE="3g.71gb",UUID="GPU-11111111-2222-3333-4444-555555555555",gpu_model="NVIDIA H200",hostname="node-3",owner="cy",project="nlp",task_id="job-9" 1`,
			`GPU_I_ID="7",GPU_I_PROFILE="1g.18gb",UUID="GPU-11111111-2222-3333-4444-555555555555",gpu_model="NVIDIA H200",hostname="node-3",owner="cy",project="nlp",task_id="job-9" 1`,
			`UUID="GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",gpu_model="Tesla \"T4\"",hostname="node-3",owner="ann@example.com",project="视觉",task_id="job-7" 1`,
			`UUID="GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b5",gpu_model="NVIDIA H100 80GB HBM3",hostname="node-3",owner="ann@example.com",project="视觉",task_id="job-7" 1`,
			`UUID="GPU-cccc",gpu_model="NVIDIA A100",hostname="node-3",owner="bob",project="nlp",task_id="job-8" 1`,
		},
		StartTimeName: {`task_id="job-7" 1.73295e+09`, `task_id="job-8" 1.7329501e+09`, `task_id="job-9" 1.7329502e+09`},
	}
	for name, series := range want {
		got := seriesOf(fams[name])
		if strings.Join(got, "\n") != strings.Join(series, "\n") {
			t.Errorf("%s scraped:\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(series, "\n"))
		}
	}
}

// scrape polls url until node_exporter answers, and parses the answer.
func scrape(t *testing.T, url string, logs fmt.Stringer) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
			if err != nil {
				t.Fatalf("node_exporter's answer does not parse: %v\n%s", err, body)
			}
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter did not answer: %v\nlogs:\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seriesOf renders a family's series as sorted `labels value` lines.
func seriesOf(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		out = append(out, fmt.Sprintf("%s %v", strings.Join(ls, ","), m.GetGauge().GetValue()))
	}
	sortStrings(out)
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// migTask is a task on two MIG instances of one H200 and a whole GPU.
func migTask() (*labels.Set, []gpu.Device) {
	s := &labels.Set{TaskID: "job-9", TaskName: "llm", Project: "nlp", Owner: "cy", Hostname: "node-3", StartTime: 1732950200}
	parent := "GPU-11111111-2222-3333-4444-555555555555"
	return s, []gpu.Device{
		{Index: 0, UUID: parent, Name: "NVIDIA H200", MIG: &gpu.MIG{UUID: "MIG-a", GPUInstanceID: 7, Profile: "1g.18gb", Slices: 1, TotalSlices: 7}},
		{Index: 0, UUID: parent, Name: "NVIDIA H200", MIG: &gpu.MIG{UUID: "MIG-b", GPUInstanceID: 2, Profile: "3g.71gb", Slices: 3, TotalSlices: 7}},
		{Index: 1, UUID: "GPU-66666666-7777-8888-9999-000000000000", Name: "NVIDIA H200"},
	}
}

func TestRenderMIG(t *testing.T) {
	// One series per instance, the parent's UUID with dcgm-exporter's
	// GPU_I_ID and GPU_I_PROFILE, so no two series are the same.
	s, gpus := migTask()
	got, err := Render(s, gpus)
	if err != nil {
		t.Fatal(err)
	}
	want := `paddle_task_gpu_info{task_id="job-9",project="nlp",owner="cy",hostname="node-3",UUID="GPU-11111111-2222-3333-4444-555555555555",gpu_model="NVIDIA H200",GPU_I_ID="7",GPU_I_PROFILE="1g.18gb"} 1
paddle_task_gpu_info{task_id="job-9",project="nlp",owner="cy",hostname="node-3",UUID="GPU-11111111-2222-3333-4444-555555555555",gpu_model="NVIDIA H200",GPU_I_ID="2",GPU_I_PROFILE="3g.71gb"} 1
paddle_task_gpu_info{task_id="job-9",project="nlp",owner="cy",hostname="node-3",UUID="GPU-66666666-7777-8888-9999-000000000000",gpu_model="NVIDIA H200",GPU_I_ID="",GPU_I_PROFILE=""} 1
`
	if !strings.Contains(string(got), want) {
		t.Errorf("Render =\n%s\nwant the GPU series\n%s", got, want)
	}
	// Each instance at its slices / 7, whatever share the probe set; the
	// whole GPU of the same task at 1.
	want = `paddle_task_gpu_share{task_id="job-9",project="nlp",owner="cy",UUID="GPU-11111111-2222-3333-4444-555555555555",GPU_I_ID="7"} 0.14285714285714285
paddle_task_gpu_share{task_id="job-9",project="nlp",owner="cy",UUID="GPU-11111111-2222-3333-4444-555555555555",GPU_I_ID="2"} 0.42857142857142855
paddle_task_gpu_share{task_id="job-9",project="nlp",owner="cy",UUID="GPU-66666666-7777-8888-9999-000000000000",GPU_I_ID=""} 1
`
	if !strings.Contains(string(got), want) {
		t.Errorf("Render =\n%s\nwant the share series\n%s", got, want)
	}
	for _, n := range gpuInfoMIGLabels {
		if !model.LegacyValidation.IsValidLabelName(n) {
			t.Errorf("label name %q is not valid under the legacy rules", n)
		}
	}
}

// The share of each kind of GPU entry: a MIG instance's slices whatever
// the probe set, a time-sliced GPU's PADDLE_GPU_SHARE, 1 otherwise (also
// for a share out of (0, 1] and for MIG attributes NVML could not give).
func TestShare(t *testing.T) {
	for _, c := range []struct {
		name string
		d    gpu.Device
		want float64
	}{
		{"whole GPU, share unset", gpu.Device{UUID: "GPU-a"}, 1},
		{"time-sliced four ways", gpu.Device{UUID: "GPU-a", Share: 0.25}, 0.25},
		{"a share over 1", gpu.Device{UUID: "GPU-a", Share: 7}, 1},
		{"a negative share", gpu.Device{UUID: "GPU-a", Share: -0.5}, 1},
		{"MIG 1g of 7", gpu.Device{UUID: "GPU-a", Share: 1, MIG: &gpu.MIG{Slices: 1, TotalSlices: 7}}, 1.0 / 7},
		{"MIG 3g of 7, a forged share", gpu.Device{UUID: "GPU-a", Share: 0.001, MIG: &gpu.MIG{Slices: 3, TotalSlices: 7}}, 3.0 / 7},
		{"MIG without slice counts", gpu.Device{UUID: "GPU-a", Share: 0.5, MIG: &gpu.MIG{}}, 0.5},
		{"MIG with more slices than the GPU", gpu.Device{UUID: "GPU-a", MIG: &gpu.MIG{Slices: 9, TotalSlices: 7}}, 1},
	} {
		if got := Share(c.d); got != c.want {
			t.Errorf("%s: Share = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRemoveStaleMIG(t *testing.T) {
	parent := "GPU-11111111-2222-3333-4444-555555555555"
	inst := func(key string, gi int) gpu.Device {
		return gpu.Device{UUID: parent, Name: "NVIDIA H200", MIG: &gpu.MIG{UUID: key, GPUInstanceID: gi, Profile: "1g.18gb", Slices: 1, TotalSlices: 7}}
	}
	whole := gpu.Device{UUID: parent, Name: "NVIDIA H200"}
	tests := []struct {
		name   string
		others map[string][]gpu.Device // other tasks' files
		mine   []gpu.Device
		stale  []string // the other tasks whose files go
	}{
		{"seven tasks on seven instances keep their files",
			map[string][]gpu.Device{"t1": {inst("MIG-1", 1)}, "t2": {inst("MIG-2", 2)}}, []gpu.Device{inst("MIG-3", 3)}, nil},
		{"the same instance again", map[string][]gpu.Device{"t1": {inst("MIG-1", 1)}, "t2": {inst("MIG-2", 2)}},
			[]gpu.Device{inst("MIG-1", 1)}, []string{"t1"}},
		{"a MIG instance ends a whole-GPU claim on its parent", map[string][]gpu.Device{"t1": {whole}},
			[]gpu.Device{inst("MIG-1", 1)}, []string{"t1"}},
		{"a whole GPU ends the MIG claims on it", map[string][]gpu.Device{"t1": {inst("MIG-1", 1)}, "t2": {inst("MIG-2", 2)}},
			[]gpu.Device{whole}, []string{"t1", "t2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for id, gpus := range tt.others {
				s := &labels.Set{TaskID: id, TaskName: "t", Project: "p", Owner: "o", Hostname: "h", StartTime: 1}
				if _, err := Write(dir, s, gpus); err != nil {
					t.Fatal(err)
				}
			}
			got, err := RemoveStale(dir, "me", tt.mine)
			if err != nil {
				t.Fatal(err)
			}
			var gone []string
			for _, st := range got {
				gone = append(gone, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(st.Path), Prefix), Suffix))
			}
			slices.Sort(gone)
			if !slices.Equal(gone, tt.stale) {
				t.Errorf("removed %v, want %v", gone, tt.stale)
			}
		})
	}
}
