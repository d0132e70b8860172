package monitor_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// gathered is what client_golang serves for c: its registry's Gather
// encoded as text 0.0.4.
func gathered(t testing.TB, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func written(t testing.TB, c *monitor.TaskCollector) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := c.Read().WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// oddTasks are n open tasks whose labels have what expfmt escapes (quotes,
// backslashes, newlines), UTF-8, empty values, values that sort before and
// after one another only at a later label; MIG instances, GPUs listed twice,
// tasks sharing a task_id across projects or owners, idle, busy and lost
// tasks, and values expfmt writes specially (0, 1, -1, NaN, ±Inf, large and
// fractional).
func oddTasks(n int, seed uint64) []store.OpenTask {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"", "a", "b", "A", "Z", "node1", "node10", "node2", `q"uote`, `back\slash`, "new\nline", "\\n", `"`,
		"é", "日本語", "ümlaut", "tab\there", "x y", "{brace}", "a,b", "=", "GPU-aaaa", "GPU-aaab", "1g.18gb", "ε\\\"\n"}
	w := func() string { return words[r.IntN(len(words))] }
	i64 := func(v int64) *int64 { return &v }
	values := []float64{0, 1, -1, 0.5, 1.0 / 3, 87.5, 1e21, 1.7635968e+09, math.NaN(), math.Inf(1), math.Inf(-1), 100, 1e-7}
	var tasks []store.OpenTask
	for k := range n {
		t := store.OpenTask{TaskID: fmt.Sprintf("t%d", r.IntN(n/2+1)), TaskName: w(), Project: w(), Owner: w() + fmt.Sprint(k),
			Priority: w(), Env: w(), Pipeline: w(), Step: w(), Hostname: w(), K8sPodUID: w(),
			StartTime: r.Int64N(2e9), LastSeen: 10000 - r.Int64N(400), Sampled: r.IntN(3) > 0}
		if r.IntN(2) == 0 {
			t.DurationEst = i64(r.Int64N(1e6))
		}
		if r.IntN(2) == 0 {
			t.IdleSince = i64(t.LastSeen - r.Int64N(5000) + 100)
		}
		if r.IntN(3) > 0 {
			t.Interval = i64(r.Int64N(120))
		}
		for range r.IntN(10) {
			g := store.OpenGPU{UUID: w(), Model: w(), Share: values[r.IntN(len(values))]}
			if r.IntN(3) == 0 {
				g.GPUInstanceID = i64(r.Int64N(14))
				g.Profile = w()
			}
			if r.IntN(2) == 0 {
				v := values[r.IntN(len(values))]
				g.LatestUtilMean = &v
			}
			t.GPUs = append(t.GPUs, g)
			if r.IntN(5) == 0 { // listed twice, maybe with another model
				d := g
				d.Model = w()
				t.GPUs = append(t.GPUs, d)
			}
		}
		tasks = append(tasks, t)
	}
	// A task of many GPUs, some listed twice.
	big := store.OpenTask{TaskID: "big", Project: "p", Owner: "o", Sampled: true, LastSeen: 10000}
	for g := range 40 {
		big.GPUs = append(big.GPUs, store.OpenGPU{UUID: fmt.Sprintf("GPU-%d", g%30), Model: "H100", Share: 1})
	}
	return append(tasks, big)
}

// The text writer's output is, byte for byte, what client_golang gathers
// and encodes for the collector over the same tasks.
func TestTaskTextEqualsGathered(t *testing.T) {
	now := time.Unix(10000, 0)
	for seed := range uint64(20) {
		src := &fakeOpen{tasks: oddTasks(60, seed)}
		c := monitor.NewTaskCollector(src, time.Hour, func() time.Time { return now })
		want, got := gathered(t, c), written(t, c)
		if got != want {
			t.Fatalf("seed %d: written:\n%s\nwant (gathered):\n%s", seed, got, want)
		}
		if seed == 0 && !(strings.Contains(got, `\"`) && strings.Contains(got, `\\`) && strings.Contains(got, `\n`) && strings.Contains(got, "日本語")) {
			t.Fatalf("seed %d: the odd values are not in the exposition:\n%s", seed, got)
		}
	}
	// No tasks; a store that fails.
	src := &fakeOpen{}
	c := monitor.NewTaskCollector(src, time.Hour, nil)
	if want, got := gathered(t, c), written(t, c); got != want {
		t.Errorf("no tasks: written:\n%s\nwant:\n%s", got, want)
	}
	src.err = errors.New("database is locked")
	if want, got := gathered(t, c), written(t, c); got != want || !strings.Contains(got, "paddle_monitor_task_scrape_error 1\n") {
		t.Errorf("store failed: written:\n%s\nwant:\n%s", got, want)
	}
}

// /metrics with ServeTasks serves the bytes promhttp serves with the
// collector registered: the tasks' families among the registry's by name,
// plain or gzipped, filtered by name[]; protobuf is still served.
func TestServeTasksEqualsRegistered(t *testing.T) {
	now := time.Unix(10000, 0)
	src := &fakeOpen{tasks: oddTasks(40, 7)}
	clock := func() time.Time { return now }
	scrapeWith := func(direct bool, path string, header map[string]string) (*httptest.ResponseRecorder, string) {
		reg := prometheus.NewRegistry()
		// A family sorting before, between and after the tasks'.
		for _, name := range []string{"paddle_monitor_a", "paddle_task_gpu_j", "paddle_zzz"} {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "h"})
			g.Set(2)
			reg.MustRegister(g)
		}
		api := monitor.New(monitor.Config{Registry: reg})
		c := monitor.NewTaskCollector(src, time.Hour, clock)
		if direct {
			api.ServeTasks(c)
		} else {
			reg.MustRegister(c)
		}
		r := httptest.NewRequest("GET", path, nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if expfmt.ResponseFormat(rec.Header()).FormatType() == expfmt.TypeProtoDelim {
			// As text, without the counters' created timestamps (the
			// two registries' counters were created apart).
			dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.ResponseFormat(rec.Header()))
			var text bytes.Buffer
			enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
			for {
				var mf dto.MetricFamily
				if err := dec.Decode(&mf); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				for _, m := range mf.Metric {
					if m.Counter != nil {
						m.Counter.CreatedTimestamp = nil
					}
				}
				if err := enc.Encode(&mf); err != nil {
					t.Fatal(err)
				}
			}
			body = text.Bytes()
		}
		return rec, string(body)
	}
	for _, tc := range []struct {
		path   string
		header map[string]string
	}{
		{"/metrics", nil},
		{"/metrics", map[string]string{"Accept-Encoding": "gzip"}},
		{"/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"}},
		{"/metrics?name[]=paddle_task_info&name[]=paddle_zzz&name[]=paddle_monitor_task_scrape_error", nil},
		{"/metrics", map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}},
	} {
		wantRec, want := scrapeWith(false, tc.path, tc.header)
		gotRec, got := scrapeWith(true, tc.path, tc.header)
		if gotRec.Code != 200 || got != want {
			t.Errorf("%s %v: %d\n%s\nwant:\n%s", tc.path, tc.header, gotRec.Code, got, want)
		}
		for _, h := range []string{"Content-Type", "Content-Encoding"} {
			if gotRec.Header().Get(h) != wantRec.Header().Get(h) {
				t.Errorf("%s %v: %s %q, want %q", tc.path, tc.header, h, gotRec.Header().Get(h), wantRec.Header().Get(h))
			}
		}
		if !slices.Equal(gotRec.Header().Values("Vary"), wantRec.Header().Values("Vary")) {
			t.Errorf("Vary %q, want %q", gotRec.Header().Values("Vary"), wantRec.Header().Values("Vary"))
		}
	}
}

// 20,000 open tasks of 8 GPUs each, as the goal of docs/benchmarks.md
// counts them.
func benchTasks() []store.OpenTask {
	f := 42.5
	tasks := make([]store.OpenTask, 20000)
	for i := range tasks {
		t := store.OpenTask{TaskID: fmt.Sprintf("task-%06d", i), TaskName: "train", Project: fmt.Sprintf("project-%02d", i%50),
			Owner: fmt.Sprintf("user%03d@example.com", i%300), Hostname: fmt.Sprintf("node%04d", i), StartTime: 1764000000 + int64(i),
			LastSeen: 1764100000, Sampled: true}
		for g := range 8 {
			t.GPUs = append(t.GPUs, store.OpenGPU{UUID: fmt.Sprintf("GPU-%08x-0000-0000-0000-%012d", i, g), Model: "NVIDIA H100 80GB HBM3",
				Share: 1, LatestUtilMean: &f})
		}
		tasks[i] = t
	}
	return tasks
}

func BenchmarkTaskText(b *testing.B) {
	src := &fakeOpen{tasks: benchTasks()}
	c := monitor.NewTaskCollector(src, time.Hour, func() time.Time { return time.Unix(1764100000, 0) })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Read().WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// The same tasks through client_golang (the collector registered), to
// compare with BenchmarkTaskText.
func BenchmarkTaskGathered(b *testing.B) {
	src := &fakeOpen{tasks: benchTasks()}
	c := monitor.NewTaskCollector(src, time.Hour, func() time.Time { return time.Unix(1764100000, 0) })
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	b.ReportAllocs()
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
}
