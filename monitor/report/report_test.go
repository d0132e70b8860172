package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

var update = flag.Bool("update", false, "rewrite the CSV and table golden files from the JSON ones")

func TestPrices(t *testing.T) {
	p, err := ParsePrices(strings.NewReader(`{"currency": "CNY", "default": 2.5, "models": {
		"Tesla T4": 2.0, "NVIDIA A100*": 12.0, "NVIDIA A100-SXM4-80GB": 15.0,
		"NVIDIA H100*": 30.0, "NVIDIA H100 80GB*": 28.0, "NVIDIA H1?0*": 29.0, "Free": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]float64{
		"Tesla T4":              2.0,  // exact
		"NVIDIA A100-SXM4-80GB": 15.0, // exact beats the glob
		"NVIDIA A100-PCIE-40GB": 12.0, // glob
		"NVIDIA H100 80GB HBM3": 28.0, // the longest matching glob
		"NVIDIA H100 PCIe":      30.0, // "NVIDIA H100*" is longer than "NVIDIA H1?0*"
		"NVIDIA H120":           29.0,
		"Tesla T4 ":             2.5, // not the exact name: default
		"tesla t4":              2.5, // model names are matched as NVML spells them
		"":                      2.5, // device nodes: default
		"Free":                  0,
	} {
		got, ok := p.Price(model)
		if !ok || got != want {
			t.Errorf("Price(%q) = %v, %v; want %v", model, got, ok, want)
		}
	}
	if p.Currency != "CNY" {
		t.Errorf("currency %q", p.Currency)
	}

	p, err = ParsePrices(strings.NewReader(`{"models": {"Tesla T4": 0.35}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Price("Tesla V100"); ok {
		t.Error("a model nothing prices, with no default, has a price")
	}
	if _, ok := p.Price(""); ok {
		t.Error("a GPU without a model, with no default, has a price")
	}

	for in, wantErr := range map[string]string{
		`{"default": -1}`:                      "default: a price is a number of at least 0",
		`{"models": {"Tesla T4": -0.5}}`:       `models["Tesla T4"]: a price is a number of at least 0`,
		`{"models": {"Tesla T4": null}}`:       `models["Tesla T4"]: a price is a number, not null`,
		`{"models": {"NVIDIA [A100": 1}}`:      `models["NVIDIA [A100"]: not a valid glob`,
		`{"models": {"": 1}}`:                  "an empty model name",
		`{"currency": "CNY", "defualt": 2}`:    `unknown field "defualt"`,
		`{"models": {"Tesla T4": "2.0"}}`:      "cannot unmarshal string",
		`{"default": 1} {"default": 2}`:        "more than one JSON value",
		``:                                     "EOF",
		`["Tesla T4"]`:                         "cannot unmarshal array",
		`{"models": {"Tesla T4": 1e400}}`:      "cannot unmarshal number",
		`{"default": 2, "models": {"x": 1}} x`: "more than one JSON value",
	} {
		_, err := ParsePrices(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !errors.Is(err, ErrBadPrices) {
			t.Errorf("ParsePrices(%s) = %v; want an ErrBadPrices saying %q", in, err, wantErr)
		}
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "prices.json")
	os.WriteFile(bad, []byte(`{"default": "two"}`), 0o644)
	if _, err := LoadPrices(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadPrices names the file: %v", err)
	}
	if _, err := LoadPrices(filepath.Join(dir, "missing.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadPrices of a missing file: %v", err)
	}
}

// fakeSource answers fixed sums and records the keys it was asked for.
type fakeSource struct {
	// tasks and gpus answer ReportSums; totalTasks is its Base (the sums
	// without model) when the keys hold model.
	tasks, totalTasks []facts.TaskSums
	gpus              []facts.GPUSums
	asked             [][]string
	// metrics and totalMetrics answer ReportMetric per metric, by the
	// query's keys and by none (the total of a report by model).
	metrics, totalMetrics map[string][]facts.MetricSums
	askedMetrics          []string
}

func (f *fakeSource) ReportSums(_ context.Context, _ facts.Window, keys []string, _ bool) (facts.Sums, error) {
	f.asked = append(f.asked, keys)
	sums := facts.Sums{Tasks: f.tasks, GPUs: f.gpus}
	if slices.Contains(keys, "model") {
		sums.Base = f.totalTasks
	}
	return sums, nil
}

func (f *fakeSource) ReportMetric(_ context.Context, _ facts.Window, keys []string, metric string) ([]facts.MetricSums, error) {
	f.askedMetrics = append(f.askedMetrics, metric+":"+strings.Join(keys, ","))
	if len(keys) == 0 {
		return f.totalMetrics[metric], nil
	}
	return f.metrics[metric], nil
}

func key(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

var nov = facts.Window{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}

// Rows merge the store's (project, owner) groups, the scope drops pairs
// from rows and total alike, and equal GPU-hours order by key bytes.
func TestComputeMergesScopesAndOrders(t *testing.T) {
	src := &fakeSource{
		tasks: []facts.TaskSums{
			{Key: key("project", "b", "owner", "x"), Tasks: 1, Completed: 1},
			{Key: key("project", "B", "owner", "y"), Tasks: 2, Open: 2},
			{Key: key("project", "b", "owner", "y"), Tasks: 3, Completed: 3, Failed: 1},
			{Key: key("project", "secret", "owner", "x"), Tasks: 9, UnlistedGPUSeconds: 999999},
		},
		gpus: []facts.GPUSums{
			{Key: key("project", "b", "owner", "x", "model", "T4"), GPUSeconds: 3600, UtilWeighted: 3600 * 40, UtilSeconds: 3600},
			{Key: key("project", "b", "owner", "y", "model", "T4"), GPUSeconds: 3600, FailedGPUSeconds: 3600, IdleGPUSeconds: 1800, UtilWeighted: 3600 * 80, UtilSeconds: 3600},
			{Key: key("project", "B", "owner", "y", "model", "T4"), GPUSeconds: 7200, IdleGPUSeconds: 720, IdleOKGPUSeconds: 720},
			{Key: key("project", "secret", "owner", "x", "model", "T4"), GPUSeconds: 999999},
		},
	}
	src.totalTasks = src.tasks
	r, err := Compute(context.Background(), src, Query{Window: nov, Scope: func(p, o string) bool { return p != "secret" }})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 2 || r.Rows[0].Key["project"] != "B" || r.Rows[1].Key["project"] != "b" {
		t.Fatalf("rows %+v, want B then b (equal GPU-hours, byte order)", r.Rows)
	}
	b := r.Rows[1]
	if b.Tasks != 4 || b.CompletedTasks != 4 || b.FailedTasks != 1 || b.GPUHours != 2 || b.FailedGPUHours != 1 ||
		b.IdleGPUHours != 0.5 || *b.UtilMean != 60 || *b.WasteShare != 0.5 || b.Cost != nil {
		t.Errorf("row b: %+v", b.Figures)
	}
	B := r.Rows[0]
	if B.UtilMean != nil || *B.WasteShare != 0.1 || B.IdleGPUHours != 0.2 {
		t.Errorf("row B: %+v", B.Figures)
	}
	if r.Total.Tasks != 6 || r.Total.GPUHours != 4 || r.Currency != nil || r.Total.Cost != nil || r.Total.UnpricedGPUHours != nil {
		t.Errorf("total: %+v", r.Total)
	}
	if len(src.asked) != 1 {
		t.Errorf("asked for sums %d times", len(src.asked))
	}
}

// With the key model a task counts in every row of its models; the total
// comes from sums without model, so it counts each task once.
func TestComputeByModelCountsTasksOnceInTotal(t *testing.T) {
	price := 2.0
	src := &fakeSource{
		tasks: []facts.TaskSums{
			{Key: key("project", "p", "owner", "o", "model", "T4"), Tasks: 1, Completed: 1},
			{Key: key("project", "p", "owner", "o", "model", "A100"), Tasks: 1, Completed: 1},
			{Key: key("project", "p", "owner", "o", "model", ""), Tasks: 1, Completed: 1},
		},
		// One task: 4 GPUs for an hour, two listed (T4 and A100), two
		// counted from device nodes.
		totalTasks: []facts.TaskSums{{Key: key("project", "p", "owner", "o"), Tasks: 1, Completed: 1, UnlistedGPUSeconds: 2 * 3600}},
		gpus: []facts.GPUSums{
			{Key: key("project", "p", "owner", "o", "model", "T4"), GPUSeconds: 3600},
			{Key: key("project", "p", "owner", "o", "model", "A100"), GPUSeconds: 3600},
		},
	}
	prices := &Prices{Currency: "USD", models: names[float64]{exact: map[string]float64{"T4": price}}}
	r, err := Compute(context.Background(), src, Query{Window: nov, By: []string{"model"}, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	// Rows: "" (2 unlisted GPUs: 2 h) first, then A100 and T4 (1 h each,
	// byte order).
	if len(r.Rows) != 3 || r.Rows[0].Key["model"] != "" || r.Rows[0].GPUHours != 2 || r.Rows[1].Key["model"] != "A100" ||
		r.Rows[2].GPUHours != 1 || r.Rows[0].Tasks != 1 || r.Total.Tasks != 1 || r.Total.GPUHours != 4 {
		t.Fatalf("rows %+v total %+v", r.Rows, r.Total)
	}
	if *r.Total.Cost != 2 || *r.Total.UnpricedGPUHours != 3 || *r.Rows[1].Cost != 0 || *r.Currency != "USD" {
		t.Errorf("cost %v unpriced %v (only T4 has a price, there is no default)", *r.Total.Cost, *r.Total.UnpricedGPUHours)
	}
	if fmt.Sprint(src.asked) != "[[model]]" {
		t.Errorf("sums asked with %v, want once by model", src.asked)
	}
}

func TestComputeRefusesBadQueries(t *testing.T) {
	src := &fakeSource{}
	for _, q := range []Query{
		{},
		{Window: facts.Window{From: nov.To, To: nov.From}},
		{Window: nov, By: []string{"gpu"}},
		{Window: nov, Metrics: []string{"accuracy", "accuracy"}},
		{Window: nov, Metrics: []string{"eval accuracy"}},
	} {
		if _, err := Compute(context.Background(), src, q); !errors.Is(err, facts.ErrBadQuery) {
			t.Errorf("Compute(%+v) = %v, want ErrBadQuery", q, err)
		}
	}
}

// A metric's mean is Σ values / tasks that reported it, per row and in the
// total; the scope drops pairs from both; by model, the total takes the
// sums grouped without model (each task once); a row no task reported the
// metric in has a null mean and 0 tasks.
func TestComputeMetrics(t *testing.T) {
	src := &fakeSource{
		tasks: []facts.TaskSums{
			{Key: key("project", "a", "owner", "x", "model", "T4"), Tasks: 2, Completed: 2},
			{Key: key("project", "a", "owner", "x", "model", "A100"), Tasks: 1, Completed: 1},
			{Key: key("project", "b", "owner", "y", "model", "A100"), Tasks: 1, Completed: 1},
			{Key: key("project", "secret", "owner", "z", "model", "T4"), Tasks: 1, Completed: 1},
		},
		totalTasks: []facts.TaskSums{
			{Key: key("project", "a", "owner", "x"), Tasks: 2, Completed: 2},
			{Key: key("project", "b", "owner", "y"), Tasks: 1, Completed: 1},
			{Key: key("project", "secret", "owner", "z"), Tasks: 1, Completed: 1},
		},
		metrics: map[string][]facts.MetricSums{
			"accuracy": {
				// task 1 (T4 and A100) reported 0.9, task 2 (T4) 0.8: T4
				// holds both, A100 task 1 alone.
				{Key: key("project", "a", "owner", "x", "model", "T4"), Sum: 1.7, Tasks: 2},
				{Key: key("project", "a", "owner", "x", "model", "A100"), Sum: 0.9, Tasks: 1},
				{Key: key("project", "secret", "owner", "z", "model", "T4"), Sum: 100, Tasks: 1},
			},
		},
		totalMetrics: map[string][]facts.MetricSums{
			"accuracy": {
				{Key: key("project", "a", "owner", "x"), Sum: 1.7, Tasks: 2},
				{Key: key("project", "secret", "owner", "z"), Sum: 100, Tasks: 1},
			},
		},
	}
	r, err := Compute(context.Background(), src, Query{Window: nov, By: []string{"model"}, Metrics: []string{"accuracy", "eval.f1"},
		Scope: func(p, o string) bool { return p != "secret" }})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(src.askedMetrics, " "); got != "accuracy:model accuracy: eval.f1:model eval.f1:" {
		t.Errorf("asked the store for %s", got)
	}
	got := map[string]string{}
	for _, row := range r.Rows {
		got[row.Key["model"]] = fmt.Sprint(meanText(row.Metrics["accuracy"]), " ", meanText(row.Metrics["eval.f1"]))
	}
	got["total"] = fmt.Sprint(meanText(r.Total.Metrics["accuracy"]), " ", meanText(r.Total.Metrics["eval.f1"]))
	want := map[string]string{"T4": "0.85/2 null/0", "A100": "0.9/1 null/0", "total": "0.85/2 null/0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("metric means %v, want %v", got, want)
	}
	if fmt.Sprint(r.Metrics) != "[accuracy eval.f1]" {
		t.Errorf("report metrics %v", r.Metrics)
	}
	// Without metrics the figures carry none, and the store is not asked.
	src.askedMetrics = nil
	r, err = Compute(context.Background(), src, Query{Window: nov, By: []string{"project"}})
	if err != nil || r.Total.Metrics != nil || r.Metrics != nil || src.askedMetrics != nil {
		t.Errorf("a report without metrics: %v %v %v %v", err, r.Total.Metrics, r.Metrics, src.askedMetrics)
	}
}

func meanText(m MetricMean) string {
	if m.Mean == nil {
		return fmt.Sprintf("null/%d", m.Tasks)
	}
	return fmt.Sprintf("%v/%d", *m.Mean, m.Tasks)
}

// The writers, on the fixture's hand-computed reports (testdata/README.md):
// the CSV and table files are what a user gets. -update rewrites them.
func TestWriters(t *testing.T) {
	for _, name := range []string{"november-by-project", "november-by-model", "november-by-project-metrics", "november-by-model-metrics",
		"december-mig-by-project", "december-mig-by-model"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		var js bytes.Buffer
		if err := Write(&js, &r, "json"); err != nil || !bytes.Equal(js.Bytes(), b) {
			t.Errorf("%s: JSON does not round-trip (%v):\n%s", name, err, js.String())
		}
		for _, f := range []struct{ format, ext string }{{"csv", ".csv"}, {"table", ".txt"}} {
			var got bytes.Buffer
			if err := Write(&got, &r, f.format); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+f.ext)
			if *update {
				os.WriteFile(golden, got.Bytes(), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s differs:\n%s", golden, got.String())
			}
		}
	}
	var out bytes.Buffer
	if err := Write(&out, &Report{}, "xml"); !errors.Is(err, facts.ErrBadQuery) || !strings.Contains(err.Error(), `format "xml" is not one of table, csv, json`) {
		t.Errorf("unknown format: %v", err)
	}
}

// Without prices there is no cost column, cost is null, and the table says
// nothing about unpriced hours; with prices lacking a default, it does.
func TestWritersWithoutPrices(t *testing.T) {
	u := 40.0
	r := &Report{From: nov.From, To: nov.To, By: []string{"project", "owner"}, Rows: []Row{{Key: key("project", "p", "owner", ""), Figures: Figures{Tasks: 2, OpenTasks: 1, GPUHours: 1.25}}}, Total: Figures{Tasks: 2, OpenTasks: 1, GPUHours: 1.25}}
	var csv, table, js bytes.Buffer
	WriteCSV(&csv, r)
	WriteTable(&table, r)
	WriteJSON(&js, r)
	if want := "project,owner,tasks,completed_tasks,failed_tasks,gate_failed_tasks,open_tasks,gpu_hours,failed_gpu_hours,idle_gpu_hours,util_mean,waste_share,duration_est_hours,duration_actual_hours,queue_wait_mean_seconds,queue_wait_max_seconds,energy_kwh\np,,2,0,0,0,1,1.25,0,0,,,0,0,,,\n"; csv.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", csv.String(), want)
	}
	if strings.Contains(table.String(), "cost") || strings.Contains(table.String(), "unpriced") ||
		!strings.Contains(table.String(), "1 task(s) have no end") {
		t.Errorf("table:\n%s", table.String())
	}
	if !strings.Contains(js.String(), `"currency": null`) || !strings.Contains(js.String(), `"cost": null`) {
		t.Errorf("JSON:\n%s", js.String())
	}
	c := "USD"
	zero := 0.0
	r.Currency, r.Total.Cost, r.Total.UnpricedGPUHours = &c, &zero, &u
	table.Reset()
	WriteTable(&table, r)
	if !strings.Contains(table.String(), "40.0 GPU-hours matched no price and no default") {
		t.Errorf("table with unpriced hours:\n%s", table.String())
	}
}

func FuzzParsePrices(f *testing.F) {
	for _, s := range []string{`{"currency":"CNY","default":2,"models":{"Tesla T4":2,"NVIDIA A100*":12}}`, `{}`, `{"models":{"[":1}}`} {
		f.Add(s, "NVIDIA A100-SXM4-80GB")
	}
	f.Fuzz(func(t *testing.T, in, model string) {
		p, err := ParsePrices(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrBadPrices) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		if price, ok := p.Price(model); ok && (price < 0 || price != price) {
			t.Fatalf("price %v for %q", price, model)
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{"project", "owner,model", ",", "project,project"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		keys, err := facts.ParseKeys(in)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] || !strings.Contains(","+strings.Join(facts.Keys, ",")+",", ","+k+",") {
				t.Fatalf("ParseKeys(%q) = %v", in, keys)
			}
			seen[k] = true
		}
	})
}

func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"2026-11-01", "2026-11-01T08:00:00+08:00", "2026-02-30", "", "2026-11-01T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := facts.ParseDate("from", in)
		if err != nil {
			if !errors.Is(err, facts.ErrBadQuery) || !strings.Contains(err.Error(), "from") {
				t.Fatalf("ParseDate(%q): %v", in, err)
			}
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("ParseDate(%q) = %v, not UTC", in, got)
		}
	})
}

// A models key whose last word is a MIG profile prices one instance-hour
// and nothing else: an instance tries only those keys (exact, then the
// longest glob), else it costs its share of price(model), where price(model)
// comes from the keys naming no profile; a whole GPU never takes a profile
// key. The energy factors are optional, each checked like a price.
func TestProfilePrices(t *testing.T) {
	p, err := ParsePrices(strings.NewReader(`{"default": 1, "models": {"NVIDIA H200*": 21, "NVIDIA H200 1g.18gb": 2.5,
		"NVIDIA H200* 3g.71gb": 8, "NVIDIA H* 3g.71gb": 9, "* 1g.10gb+me": 1.5, "NVIDIA A100 1g": 7},
		"energy": {"price_per_kwh": 0.8}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model, profile string
		mig            bool
		share, want    float64
		ok             bool
	}{
		{"NVIDIA H200", "1g.18gb", true, 1.0 / 7, 2.5, true},         // exact profile key
		{"NVIDIA H200", "3g.71gb", true, 3.0 / 7, 8, true},           // the longer of two globs
		{"NVIDIA H100 80GB HBM3", "3g.71gb", true, 3.0 / 7, 9, true}, // the other glob
		{"NVIDIA A100-SXM4-40GB", "1g.10gb+me", true, 1.0 / 7, 1.5, true},
		{"NVIDIA H200", "2g.35gb", true, 2.0 / 7, 21 * 2.0 / 7, true}, // no profile key: share of the GPU's glob
		{"NVIDIA H200", "", true, 2.0 / 7, 21 * 2.0 / 7, true},        // a profile not reported
		{"NVIDIA H200", "", false, 1, 21, true},                       // a whole GPU: never a profile key
		{"NVIDIA H200", "", false, 0.25, 21 * 0.25, true},             // time-sliced
		{"Tesla T4", "", false, 0.5, 0.5, true},                       // the default × share
		{"NVIDIA A100 1g", "", false, 1, 7, true},                     // "1g" is not a profile: a model key
	} {
		if got, ok := p.EntryPrice(c.model, c.profile, c.mig, c.share); ok != c.ok || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("EntryPrice(%q, %q, mig %v, share %g) = %g, %v; want %g", c.model, c.profile, c.mig, c.share, got, ok, c.want)
		}
	}
	if v, ok := p.Price("NVIDIA H200 1g.18gb"); !ok || v != 21 {
		t.Errorf("Price of a model named like a profile key = %g, %v; want the whole GPU's glob 21", v, ok)
	}
	if *p.PricePerKWh != 0.8 || p.CO2KgPerKWh != nil {
		t.Errorf("energy factors %v %v", p.PricePerKWh, p.CO2KgPerKWh)
	}
	for in, want := range map[string]string{
		`{"energy": {"price_per_kwh": -1}}`:     "energy.price_per_kwh: a price is a number of at least 0",
		`{"energy": {"co2_kg_per_kwh": "0.5"}}`: "cannot unmarshal string",
		`{"energy": {"kwh": 1}}`:                `unknown field "kwh"`,
		`{"energy": 0.8}`:                       "cannot unmarshal number",
	} {
		if _, err := ParsePrices(strings.NewReader(in)); err == nil || !errors.Is(err, ErrBadPrices) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePrices(%s) = %v, want an error saying %q", in, err, want)
		}
	}
}

// TestCSVTextCells: a key cell a spreadsheet would run as a formula gets a
// leading ' (OWASP's rule); other text and the figures are written as they
// are, and the table keeps the original text.
func TestCSVTextCells(t *testing.T) {
	rep := &Report{By: []string{"model"}, From: time.Unix(0, 0).UTC(), To: time.Unix(3600, 0).UTC()}
	for _, m := range []string{"=cmd|' /C calc'!A0", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "NVIDIA A100", "a=b", ""} {
		rep.Rows = append(rep.Rows, Row{Key: map[string]string{"model": m}, Figures: Figures{GPUHours: 1.5}})
	}
	var b strings.Builder
	if err := WriteCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"'=cmd|' /C calc'!A0", "'+1", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx", "NVIDIA A100", "a=b", ""}
	for i, w := range want {
		if got := rows[i+1][0]; got != w {
			t.Errorf("model cell %d: %q, want %q", i, got, w)
		}
		if rows[i+1][1] == "" || strings.HasPrefix(rows[i+1][1], "'") {
			t.Errorf("a figure cell was touched: %q", rows[i+1])
		}
	}
	var tb strings.Builder
	if err := WriteTable(&tb, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "=cmd|' /C calc'!A0") || strings.Contains(tb.String(), "'=cmd") {
		t.Errorf("the table does not show the original text:\n%s", tb.String())
	}
}
