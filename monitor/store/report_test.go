package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

var updateBudgets = flag.Bool("update-budgets", false, "rewrite the budgets golden files (check them against the README by hand)")

// fixtureDir holds the report fixture whose every figure is computed by
// hand in its README.
const fixtureDir = "../report/testdata"

type fixtureEvent struct {
	Register *struct {
		TaskID      string `json:"task_id"`
		TaskName    string `json:"task_name"`
		Project     string `json:"project"`
		Owner       string `json:"owner"`
		Priority    string `json:"priority"`
		Env         string `json:"env"`
		Pipeline    string `json:"pipeline"`
		Step        string `json:"step"`
		Hostname    string `json:"hostname"`
		GPUCount    int64  `json:"gpu_count"`
		StartTime   int64  `json:"start_time"`
		SubmitTime  *int64 `json:"submit_time"`
		DurationEst *int64 `json:"duration_est"`
		GPUs        []struct {
			Index int64     `json:"index"`
			UUID  string    `json:"uuid"`
			Name  string    `json:"name"`
			Share float64   `json:"share"`
			MIG   *wire.MIG `json:"mig"`
		} `json:"gpus"`
	} `json:"register"`
	Complete  json.RawMessage `json:"complete"`
	Heartbeat *struct {
		TaskID string `json:"task_id"`
		Time   int64  `json:"time"`
	} `json:"heartbeat"`
}

// loadFixture stores the fixture's registrations, completions and
// heartbeats through the store's write methods, in order.
func loadFixture(t testing.TB, s *store.Store) {
	t.Helper()
	loadFixtureFile(t, s, "fixture.json")
}

// loadFixtureFile is loadFixture of the fixture file name.
func loadFixtureFile(t testing.TB, s *store.Store, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, raw := range f.Events {
		var e fixtureEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Register != nil:
			r := e.Register
			body, _ := json.Marshal(r)
			reg := &registration{Registration: &wire.Registration{TaskID: r.TaskID, TaskName: r.TaskName, Project: r.Project, Owner: r.Owner,
				Priority: r.Priority, Env: r.Env, Pipeline: r.Pipeline, Step: r.Step, Hostname: r.Hostname,
				StartTime: &r.StartTime, SubmitTime: r.SubmitTime, GPUCount: &r.GPUCount, DurationEst: r.DurationEst}, Body: body}
			for _, g := range r.GPUs {
				reg.GPUs = append(reg.GPUs, wire.RegisteredGPU{Index: ptrOf[int64](g.Index), UUID: g.UUID, Name: g.Name, Share: ptrOf(g.Share), MIG: g.MIG})
			}
			if _, err := register(s, reg); err != nil {
				t.Fatalf("register %s: %v", r.TaskID, err)
			}
		case e.Complete != nil:
			var c wire.Completion
			if err := json.Unmarshal(e.Complete, &c); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Complete(ctx, &c, e.Complete, store.Sender{}); err != nil {
				t.Fatalf("complete %s: %v", c.TaskID, err)
			}
		case e.Heartbeat != nil:
			if err := s.Heartbeat(ctx, e.Heartbeat.TaskID, e.Heartbeat.Time, nil); err != nil {
				t.Fatalf("heartbeat %s: %v", e.Heartbeat.TaskID, err)
			}
		}
	}
}

var november = facts.Window{
	From: time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC),
	To:   time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC),
}

// The fixture's reports, computed by the SQL of each store, are the ones
// computed by hand (monitor/report/testdata/README.md), byte for byte, and so are
// the same on SQLite and PostgreSQL.
func TestReportFixture(t *testing.T) {
	prices, err := report.LoadPrices(filepath.Join(fixtureDir, "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadFixture(t, s)
		for _, c := range []struct {
			by, metrics []string
			golden      string
		}{
			{[]string{"project"}, nil, "november-by-project.json"},
			{[]string{"model"}, nil, "november-by-model.json"},
			// "eval.accuracy" is one key of the completion's metrics
			// object, not the path eval → accuracy.
			{[]string{"project"}, []string{"accuracy", "eval.accuracy"}, "november-by-project-metrics.json"},
			{[]string{"model"}, []string{"accuracy", "eval.accuracy"}, "november-by-model-metrics.json"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := report.Compute(ctx, s, report.Query{Window: november, By: c.by, Prices: prices, Metrics: c.metrics})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := report.WriteJSON(&got, r); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(fixtureDir, c.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("by %v: the report differs from %s:\n%s", c.by, c.golden, got.String())
			}
		}
	})
}

var december = facts.Window{
	From: time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC),
	To:   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
}

// The MIG, shared-GPU and energy fixture (fixture-mig.json): GPU-hours
// weighted by share, MIG instances priced by profile or by share, energy
// clipped to the window and priced, all computed by hand in
// monitor/report/testdata/README.md, byte for byte and so the same on both stores.
func TestReportFixtureMIG(t *testing.T) {
	prices, err := report.LoadPrices(filepath.Join(fixtureDir, "prices-mig.json"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadFixtureFile(t, s, "fixture-mig.json")
		for _, c := range []struct {
			by     []string
			golden string
		}{
			{[]string{"project"}, "december-mig-by-project.json"},
			{[]string{"model"}, "december-mig-by-model.json"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := report.Compute(ctx, s, report.Query{Window: december, By: c.by, Prices: prices})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := report.WriteJSON(&got, r); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(fixtureDir, c.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("by %v: the report differs from %s:\n%s", c.by, c.golden, got.String())
			}
		}
	})
}

// A metric key is a bound parameter checked by the name rule: a hostile
// key is refused before any SQL runs, and keys that look like JSON paths
// or SQL find nothing rather than something else.
func TestReportMetricKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadFixture(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, bad := range []string{`accuracy"`, "accuracy') OR 1=1 --", "$.accuracy", "", "a b"} {
			if _, err := s.ReportMetric(ctx, november, []string{"project"}, bad); !errors.Is(err, facts.ErrBadQuery) {
				t.Errorf("ReportMetric(%q) = %v, want ErrBadQuery", bad, err)
			}
		}
		// "eval" alone and "accuracy.eval" are not keys of any completion.
		for _, none := range []string{"eval", "accuracy.eval", "loss"} {
			if got, err := s.ReportMetric(ctx, november, []string{"project"}, none); err != nil || len(got) != 0 {
				t.Errorf("ReportMetric(%q) = %+v, %v; want no sums", none, got, err)
			}
		}
		// Groups are the keys plus project and owner: t01 (ann, 0.92) and
		// t12 (bob, 0.96); t10 (0.1) ended in October.
		got, err := s.ReportMetric(ctx, november, []string{"project"}, "eval.accuracy")
		sums := map[string]string{}
		for _, m := range got {
			sums[m.Key["project"]+"/"+m.Key["owner"]] = fmt.Sprintf("%g/%d", m.Sum, m.Tasks)
		}
		if want := "map[search/ann@example.com:0.92/1 search/bob:0.96/1]"; err != nil || fmt.Sprint(sums) != want {
			t.Errorf("ReportMetric(eval.accuracy) = %v, %v; want %s", sums, err, want)
		}
	})
}

// The fixture's November by project with budgets.json, on both stores:
// in a later month the forecast is what was used
// (november-by-project-budgets.json, computed by hand in the README); on
// November 25 at 12:00 the tasks seen in the last 10 minutes (t05 alone:
// 2 × T4 at 2) add 132 hours to vision's forecast.
func TestReportBudgets(t *testing.T) {
	prices, err := report.LoadPrices(filepath.Join(fixtureDir, "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := report.LoadBudgets(filepath.Join(fixtureDir, "budgets.json"), prices, "prices.json")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadFixture(t, s)
		for _, c := range []struct {
			now    time.Time
			golden string
		}{
			{time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), "november-by-project-budgets.json"},
			{time.Date(2025, 11, 25, 12, 0, 0, 0, time.UTC), "november-by-project-budgets-forecast.json"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := report.Compute(ctx, s, report.Query{Window: november, Prices: prices, Budgets: budgets, Now: c.now})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := report.WriteJSON(&got, r); err != nil {
				t.Fatal(err)
			}
			if *updateBudgets {
				os.WriteFile(filepath.Join(fixtureDir, c.golden), got.Bytes(), 0o644)
			}
			want, err := os.ReadFile(filepath.Join(fixtureDir, c.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("now %s: the report differs from %s:\n%s", c.now, c.golden, got.String())
			}
		}
		// Budgets are for reports by project over one calendar month only.
		for _, q := range []report.Query{
			{Window: november, By: []string{"owner"}},
			{Window: facts.Window{From: november.From, To: november.To.Add(-time.Hour)}},
			{Window: facts.Window{From: november.From.AddDate(0, -1, 0), To: november.To}},
		} {
			q.Prices, q.Budgets = prices, budgets
			r, err := report.Compute(context.Background(), s, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range r.Rows {
				if row.Budget != nil {
					t.Errorf("%v %v: row %v has a budget", q.By, q.Window, row.Key)
				}
			}
		}
	})
}

// Queue wait by priority, on both stores: the wait (start − submit) counts
// for tasks with a submit_time that started inside the window [1000, 5000).
//
//	h1 high  submit  400 start 1000: 600    h2 high submit 1000 start 4000: 3000
//	h3 high  submit  100 start  900: started before the window (its
//	         heartbeat at 1500 makes it a task of the window): not counted
//	h4 high  submit 4000 start 5000: at the window's end, not a task of it
//	l1 low   submit 1000 start 1000: 0      l2 low  no submit_time
//	n1 none  no submit_time, start 3000
//
// high: mean (600 + 3000) / 2 = 1800, max 3000; low: 0 / 0; the row
// without a priority (n1) null / null; total (600 + 3000 + 0) / 3 = 1200,
// max 3000.
func TestReportQueueWaitByPriority(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		for _, c := range []struct {
			id, priority  string
			submit, start int64
		}{
			{"h1", "high", 400, 1000}, {"h2", "high", 1000, 4000}, {"h3", "high", 100, 900},
			{"h4", "high", 4000, 5000}, {"l1", "low", 1000, 1000}, {"l2", "low", 0, 2000}, {"n1", "", 0, 3000},
		} {
			r := reg(c.id, "search", "ann", c.start)
			r.Priority = c.priority
			if c.submit > 0 {
				r.SubmitTime = &c.submit
			}
			mustRegister(t, s, r)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Heartbeat(ctx, "h3", 1500, nil); err != nil {
			t.Fatal(err)
		}
		w := facts.Window{From: time.Unix(1000, 0), To: time.Unix(5000, 0)}
		r, err := report.Compute(ctx, s, report.Query{Window: w, By: []string{"priority"}})
		if err != nil {
			t.Fatal(err)
		}
		show := func(f report.Figures) string {
			v := func(x *float64) string {
				if x == nil {
					return "null"
				}
				return fmt.Sprint(*x)
			}
			return v(f.QueueWaitMeanSeconds) + "/" + v(f.QueueWaitMaxSeconds)
		}
		got := map[string]string{"total": show(r.Total), "tasks": fmt.Sprint(r.Total.Tasks)}
		for _, row := range r.Rows {
			got["priority="+row.Key["priority"]] = show(row.Figures)
		}
		want := map[string]string{"priority=high": "1800/3000", "priority=low": "0/0", "priority=": "null/null", "total": "1200/3000",
			"tasks": "6"} // h1 h2 h3 l1 l2 n1
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("queue wait by priority: %v, want %v", got, want)
		}
	})
}

// ReportSums' passes answer the reports of the separate queries byte for
// byte, for every key alone, model with another key, with and without a
// scope (unscoped, the groups leave project and owner out), on both
// fixtures and both stores.
func TestReportSumsEqualsSeparateQueries(t *testing.T) {
	for _, fx := range []struct {
		file, prices string
		w            facts.Window
	}{
		{"fixture.json", "prices.json", november},
		{"fixture-mig.json", "prices-mig.json", december},
	} {
		t.Run(fx.file, func(t *testing.T) {
			prices, err := report.LoadPrices(filepath.Join(fixtureDir, fx.prices))
			if err != nil {
				t.Fatal(err)
			}
			storetest.Each(t, func(t *testing.T, dsn string) {
				s := storetest.Open(t, dsn)
				loadFixtureFile(t, s, fx.file)
				bys := [][]string{{"model", "project"}, {"owner", "model"}, {"project", "owner"}}
				for _, k := range facts.Keys {
					bys = append(bys, []string{k})
				}
				all := func(string, string) bool { return true }
				some := func(project, _ string) bool { return project < "m" }
				run := func(src facts.Source, by []string, scope func(string, string) bool) string {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					r, err := report.Compute(ctx, src, report.Query{Window: fx.w, By: by, Prices: prices, Scope: scope})
					if err != nil {
						t.Fatal(err)
					}
					var b bytes.Buffer
					if err := report.WriteJSON(&b, r); err != nil {
						t.Fatal(err)
					}
					return b.String()
				}
				for _, by := range bys {
					for _, scope := range []func(string, string) bool{nil, all, some} {
						want := run(store.SeparateQueriesForTest(s), by, scope)
						if got := run(s, by, scope); got != want {
							t.Errorf("by %v (scope %v): ReportSums answers\n%s\nthe separate queries\n%s", by, scope != nil, got, want)
						}
					}
				}
			})
		})
	}
}
