package main

// Black-box tests of the report side of the built paddle-monitor: the
// fixture of monitor/report/testdata (every figure computed by hand in its README)
// posted to a real serve process, then `paddle-monitor report`, GET
// /v1/report, /metrics (through promtool) and the page in a real headless
// Chromium.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

var screenshot = flag.Bool("screenshot", false, "rewrite docs/report-page.png from the browser test")

const fixtureDir = "../../monitor/report/testdata"

func fixtureFile(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(fixtureFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// postFixture sends the fixture's events to s in order, each exchange
// checked against docs/openapi.yaml.
func postFixture(t *testing.T, s *server, token string) {
	t.Helper()
	postFixtureFile(t, s, token, "fixture.json")
}

// postFixtureFile is postFixture of the fixture file name.
func postFixtureFile(t *testing.T, s *server, token, name string) {
	t.Helper()
	var f struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal([]byte(readFixture(t, name)), &f); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{"register": "/v1/task/register", "complete": "/v1/task/complete", "heartbeat": "/v1/task/heartbeat"}
	for _, e := range f.Events {
		for kind, body := range e {
			r := post(paths[kind], string(body), token)
			switch kind {
			case "register":
				r = registerReq(string(body), token)
			case "complete":
				var c struct {
					TaskID string `json:"task_id"`
				}
				json.Unmarshal(body, &c)
				r.Header = map[string]string{"Idempotency-Key": c.TaskID + "/complete", "User-Agent": "paddle-entrypoint/test"}
			}
			a := s.do(t, r)
			if a.Status != 200 && a.Status != 201 {
				t.Fatalf("POST %s %s: %d %s", paths[kind], body, a.Status, a.Body)
			}
		}
	}
}

// `paddle-monitor report` and GET /v1/report over the fixture print the
// hand-computed reports byte for byte, on SQLite and on PostgreSQL.
func TestReportFixture(t *testing.T) {
	prices := fixtureFile(t, "prices.json")
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", prices)
		postFixture(t, s, "")
		window := []string{"--db", db, "--from", "2025-11-01", "--to", "2025-12-01", "--prices", prices}
		for _, c := range []struct {
			args   []string
			golden string
		}{
			{[]string{"--format", "json"}, "november-by-project.json"},
			{[]string{"--format", "csv"}, "november-by-project.csv"},
			{nil, "november-by-project.txt"}, // table is the default
			{[]string{"--by", "model", "--format", "json"}, "november-by-model.json"},
			{[]string{"--by", "model", "--format", "csv"}, "november-by-model.csv"},
			{[]string{"--by", "model", "--format", "table"}, "november-by-model.txt"},
			// Completion metrics beside cost; "eval.accuracy" is one dotted key.
			{[]string{"--metric", "accuracy", "--metric", "eval.accuracy", "--format", "json"}, "november-by-project-metrics.json"},
			{[]string{"--metric", "accuracy", "--metric", "eval.accuracy", "--format", "csv"}, "november-by-project-metrics.csv"},
			{[]string{"--metric", "accuracy", "--metric", "eval.accuracy"}, "november-by-project-metrics.txt"},
			{[]string{"--by", "model", "--metric", "accuracy", "--metric", "eval.accuracy", "--format", "json"}, "november-by-model-metrics.json"},
			{[]string{"--by", "model", "--metric", "accuracy", "--metric", "eval.accuracy", "--format", "table"}, "november-by-model-metrics.txt"},
		} {
			r := runMonitor(t, append(append([]string{"report"}, window...), c.args...)...)
			if r.code != 0 || r.stdout != readFixture(t, c.golden) {
				t.Errorf("report %v: exit %d, stderr %s\nstdout:\n%s\nwant %s", c.args, r.code, r.stderr, r.stdout, c.golden)
			}
		}
		for query, golden := range map[string]string{
			"from=2025-11-01&to=2025-12-01":                                                 "november-by-project.json",
			"from=2025-11-01&to=2025-12-01&by=model":                                        "november-by-model.json",
			"from=2025-11-01&to=2025-12-01&by=model&format=csv":                             "november-by-model.csv",
			"from=2025-11-01&to=2025-12-01&metric=accuracy&metric=eval.accuracy":            "november-by-project-metrics.json",
			"from=2025-11-01&to=2025-12-01&by=model&metric=accuracy&metric=eval.accuracy":   "november-by-model-metrics.json",
			"from=2025-11-01&to=2025-12-01&metric=accuracy&metric=eval.accuracy&format=csv": "november-by-project-metrics.csv",
		} {
			a := s.do(t, get("/v1/report?"+query, ""))
			if a.Status != 200 || string(a.Body) != readFixture(t, golden) {
				t.Errorf("GET /v1/report?%s: %d\n%s\nwant %s", query, a.Status, a.Body, golden)
			}
		}

		if a := s.do(t, get("/v1/report?from=2025-11-01&to=2025-12-01&metric=acc%27%29--", "")); a.Status != 400 ||
			!strings.Contains(a.Error(t), `parameter metric "acc')--": a metric name is 1 to 63 letters`) {
			t.Errorf("GET /v1/report with a hostile metric: %d %s", a.Status, a.Body)
		}
		// By pipeline and step with a metric, as docs/cost.md shows it: the
		// ranker's train step (t01 0.9, t02 0.5) and eval step (t03: ended
		// in December, so no task), lm's prepare step (t08, no metrics);
		// t09 (1) and t12 (0.97) set no pipeline: (1 + 0.97) / 2 = 0.985.
		r := runMonitor(t, "report", "--db", db, "--from", "2025-11-01", "--to", "2025-12-01", "--format", "csv",
			"--by", "pipeline,step", "--metric", "accuracy")
		lines := map[string]string{}
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Split(l, ","); len(f) > 2 {
				lines[f[0]+"/"+f[1]] = strings.Join(f[len(f)-2:], ",")
			}
		}
		if want := "map[/:0.985,2 lm/prepare:,0 pipeline/step:metric_accuracy_mean,metric_accuracy_tasks ranker/eval:,0 ranker/train:0.7,2]"; r.code != 0 || fmt.Sprint(lines) != want {
			t.Errorf("report by pipeline,step with accuracy: exit %d %s\n%s\ngot %v, want %s", r.code, r.stderr, r.stdout, lines, want)
		}

		// Without prices: no cost column, and the table says how many tasks
		// have no end.
		r = runMonitor(t, "report", "--db", db, "--from", "2025-11-01", "--to", "2025-12-01")
		if r.code != 0 || strings.Contains(r.stdout, "cost") || !strings.Contains(r.stdout, "3 task(s) have no end") {
			t.Errorf("report without prices: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Prices without a default: T4 at 0.35; the other 46.5 GPU-hours are
		// unpriced. 11.375 in the table: money has 2 decimals there.
		r = runMonitor(t, "report", "--db", db, "--from", "2025-11-01", "--to", "2025-12-01", "--format", "table",
			"--prices", fixtureFile(t, "prices-nodefault.json"))
		if r.code != 0 || !strings.Contains(r.stdout, "cost in USD") || !strings.Contains(r.stdout, " 11.38 ") ||
			!strings.Contains(r.stdout, "46.5 GPU-hours matched no price and no default") {
			t.Errorf("report with prices lacking a default: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// A window that clips: the first of November alone holds t01's 2 h
		// × 2 GPUs and t11's 24 h: 28 GPU-hours. t01 has a submit_time but
		// started on October 31: its wait is not November 1's (null).
		r = runMonitor(t, "report", "--db", db, "--from", "2025-11-01", "--to", "2025-11-02T00:00:00Z", "--format", "csv", "--by", "project,owner")
		want := "project,owner,tasks,completed_tasks,failed_tasks,gate_failed_tasks,open_tasks,gpu_hours,failed_gpu_hours,idle_gpu_hours,util_mean,waste_share,duration_est_hours,duration_actual_hours,queue_wait_mean_seconds,queue_wait_max_seconds,energy_kwh\n" +
			"vision,dan,1,0,0,0,1,24,0,0,,0,0,0,,,\n" +
			"search,ann@example.com,1,1,0,0,0,4,0,0.5,60,0.125,4,4,,,\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("report of November 1: exit %d %s\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
		}
	})
}

// MIG instances, time-sliced GPUs and energy (fixture-mig.json, every
// figure computed by hand in monitor/report/testdata/README.md): `paddle-monitor
// report` and GET /v1/report print the goldens byte for byte on SQLite and
// PostgreSQL; without prices energy_kwh stays and energy_cost, co2_kg are
// null.
func TestReportFixtureMIG(t *testing.T) {
	prices := fixtureFile(t, "prices-mig.json")
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", prices)
		postFixtureFile(t, s, "", "fixture-mig.json")
		window := []string{"--db", db, "--from", "2025-12-01", "--to", "2026-01-01", "--prices", prices}
		for _, c := range []struct {
			args   []string
			golden string
		}{
			{[]string{"--format", "json"}, "december-mig-by-project.json"},
			{[]string{"--format", "csv"}, "december-mig-by-project.csv"},
			{nil, "december-mig-by-project.txt"},
			{[]string{"--by", "model", "--format", "json"}, "december-mig-by-model.json"},
			{[]string{"--by", "model", "--format", "csv"}, "december-mig-by-model.csv"},
			{[]string{"--by", "model"}, "december-mig-by-model.txt"},
		} {
			r := runMonitor(t, append(append([]string{"report"}, window...), c.args...)...)
			if r.code != 0 || r.stdout != readFixture(t, c.golden) {
				t.Errorf("report %v: exit %d, stderr %s\nstdout:\n%s\nwant %s", c.args, r.code, r.stderr, r.stdout, c.golden)
			}
		}
		for query, golden := range map[string]string{
			"from=2025-12-01&to=2026-01-01":                     "december-mig-by-project.json",
			"from=2025-12-01&to=2026-01-01&by=model&format=csv": "december-mig-by-model.csv",
		} {
			a := s.do(t, get("/v1/report?"+query, ""))
			if a.Status != 200 || string(a.Body) != readFixture(t, golden) {
				t.Errorf("GET /v1/report?%s: %d\n%s\nwant %s", query, a.Status, a.Body, golden)
			}
		}
		// The page shows the energy beside the GPU-hours: kWh, its cost and
		// CO2 (the prices file has both factors); "–" where none was reported.
		page := string(s.do(t, request{Method: "GET", Path: "/?month=2025-12", NoSpecCheck: true}).Body)
		for _, want := range []string{"<th>Energy (kWh)</th><th>Energy cost (CNY)</th><th>CO₂ (kg)</th>",
			`<td class="key">llm</td><td>13.0</td><td>217.50</td>`, "<td>3.70</td><td>2.96</td><td>2.04</td>",
			`<td class="key">nlp</td>`, "<td>–</td><td></td><td>–</td>", "<td>5.70</td><td>4.56</td><td>3.13</td>"} {
			if !strings.Contains(page, want) {
				t.Errorf("the page of December lacks %s:\n%s", want, page)
			}
		}
		r := runMonitor(t, "report", "--db", db, "--from", "2025-12-01", "--to", "2026-01-01", "--format", "csv")
		want := "project,tasks,completed_tasks,failed_tasks,gate_failed_tasks,open_tasks,gpu_hours,failed_gpu_hours,idle_gpu_hours,util_mean,waste_share,duration_est_hours,duration_actual_hours,queue_wait_mean_seconds,queue_wait_max_seconds,energy_kwh\n" +
			"llm,3,3,1,0,0,13,10,0,,0.769230769,0,0,,,3.7\n" +
			"vision,3,2,0,0,1,7,0,1,60,0.142857143,0,0,,,2\n" +
			"nlp,1,1,0,0,0,2,0,0,,0,0,0,,,\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("report without prices: exit %d %s\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
		}
	})
}

// Wrong input names what is wrong: usage errors exit 2, a missing
// database or a bad prices file exit 1, and no database is ever created.
func TestReportCommandErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nothing-here.db")
	badPrices := filepath.Join(dir, "prices.json")
	writeFile(t, badPrices, `{"currency": "CNY", "models": {"Tesla T4": -2}}`)
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01"}, 1, "--db " + missing + ": no such database file"},
		{[]string{"--db", missing, "--to", "2025-12-01"}, 2, "--from is required"},
		{[]string{"--db", missing, "--from", "2025-11-31", "--to", "2025-12-01"}, 2, `--from "2025-11-31" is neither RFC 3339`},
		{[]string{"--db", missing, "--from", "2025-12-01", "--to", "2025-11-01"}, 2, "must be before to"},
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01", "--by", "project,gpu"}, 2, `unknown key "gpu"`},
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01", "--format", "xlsx"}, 2, `--format "xlsx": allowed: table, csv, json`},
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01", "--prices", badPrices}, 1, `prices file ` + badPrices + `: bad prices file: models["Tesla T4"]: a price is a number of at least 0`},
		{[]string{"--from", "2025-11-01", "--to", "2025-12-01", "extra"}, 2, "report takes no arguments"},
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01", "--metric", "eval accuracy"}, 2, `--metric "eval accuracy": a metric name is 1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit`},
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01", "--metric", `$."x"`}, 2, `--metric "$.\"x\"": a metric name`},
		{[]string{"--db", missing, "--from", "2025-11-01", "--to", "2025-12-01", "--metric", "loss", "--metric", "loss"}, 2, `--metric "loss" given twice`},
	} {
		r := runMonitorEnv(t, dir, nil, append([]string{"report"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.stderr) || r.stdout != "" {
			t.Errorf("report %v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.stderr)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("report created %s: %v", missing, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "paddle-monitor.db")); !os.IsNotExist(err) {
		t.Errorf("report created the default database: %v", err)
	}
}

// /metrics of the fixture's open tasks passes `promtool check metrics`,
// with UUID as the join key; completed tasks are not there.
func TestMetricsOpenTasksPromtool(t *testing.T) {
	// The fixture's open tasks were last seen in 2025: a long --open-ttl
	// keeps them on /metrics, the default one drops them.
	s := startServer(t, storetest.SQLiteDSN(t), "--open-ttl", "200000h", "--exec-ttl", "200000h")
	postFixture(t, s, "")
	a := s.do(t, get("/metrics", ""))
	body := string(a.Body)
	for _, id := range []string{"t04-open-heartbeat", "t05-open-silent", "t06-open-october", "t11-open-across"} {
		if !strings.Contains(body, `paddle_task_info{env="",hostname="`) || !strings.Contains(body, `task_id="`+id+`"`) {
			t.Errorf("open task %s is not on /metrics", id)
		}
	}
	if !strings.Contains(body, `paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-4444aaaa-0000-0000-0000-000000000001",gpu_model="NVIDIA H100 80GB HBM3",hostname="node4",owner="cho",project="vision",task_id="t04-open-heartbeat"} 1`) {
		t.Errorf("t04's GPU is not on /metrics:\n%s", body)
	}
	if strings.Contains(body, "t01-midnight") {
		t.Error("a completed task is on /metrics")
	}
	tool := harness.Tool(t, "promtool")
	c := exec.Command(tool, "check", "metrics")
	c.Stdin = strings.NewReader(body)
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	s2 := startServer(t, storetest.SQLiteDSN(t))
	postFixture(t, s2, "")
	if body := string(s2.do(t, get("/metrics", "")).Body); strings.Contains(body, "paddle_task_info{") {
		t.Errorf("tasks last seen in 2025 are on /metrics with the default --open-ttl of 168h")
	}
}

// The page, in a real headless browser, over the built server with the
// fixture: it loads without a console error or an exception, requests
// nothing but itself, and shows the fixture's projects, costs and running
// tasks. -screenshot rewrites docs/report-page.png.
func TestPageInBrowser(t *testing.T) {
	browser := harness.Tool(t, "chromium")
	tokens := tokensFile(t, t.TempDir())
	s := startServer(t, storetest.SQLiteDSN(t), "--prices", fixtureFile(t, "prices.json"), "--open-ttl", "200000h", "--exec-ttl", "200000h", "--tokens", tokens)
	postFixture(t, s, "a-secret")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser),
		chromedp.NoSandbox, // tests run as root
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, "console "+string(e.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(listen))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	// The token as the password of HTTP Basic authentication, as a
	// person's browser sends it after the prompt.
	page := strings.Replace(s.URL, "http://", "http://finance:a-secret@", 1) + "/?month=2025-11"
	// Runtime is enabled by the context (console calls, exceptions); Log
	// (failed loads, CSP violations) is not.
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("svg"))); err != nil {
		t.Fatalf("browser: %v\nserver log:\n%s", err, s.Log())
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	requests, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(e => e.name)`))
	if err != nil {
		t.Fatal(err)
	}
	// The monthly chart's value axis, bottom up: round and distinct.
	axis, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('svg text[text-anchor="end"]')].map(e => e.textContent).filter(s => /^[0-9.]+$/.test(s))`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(axis, " "); got != "0 200 400 600 800" {
		t.Errorf("the chart's axis reads %q", got)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page logged problems: %q", problems)
	}
	if len(requests) > 0 {
		t.Errorf("the page loaded other resources: %q", requests)
	}
	if title != "GPU cost by project, November 2025 — paddle-monitor" {
		t.Errorf("title %q", title)
	}
	for _, want := range []string{"search", "vision", "nlp", "656.00", "401.00", "230.00", "79.0", "Running tasks",
		"finetune-vit", "label-images", "CSV by project", "3 such task(s)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q:\n%s", want, text)
		}
	}
	if *screenshot {
		if err := os.WriteFile("../../docs/report-page.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
