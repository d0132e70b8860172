package main

// Black-box tests of budgets (docs/cost.md, Budgets) on the built
// paddle-monitor: `report --budgets` and `serve --budgets` over the
// fixture (monitor/report/testdata/README.md computes every figure by hand), bad
// budgets files refused at start, and the project month series of
// /metrics, computed at most once a minute.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestBudgetsReport(t *testing.T) {
	prices, budgets := fixtureFile(t, "prices.json"), fixtureFile(t, "budgets.json")
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", prices, "--budgets", budgets)
		postFixture(t, s, "")
		golden := readFixture(t, "november-by-project-budgets.json")
		window := []string{"--db", db, "--from", "2025-11-01", "--to", "2025-12-01", "--prices", prices}
		r := runMonitor(t, append(append([]string{"report"}, window...), "--budgets", budgets, "--format", "json")...)
		if r.code != 0 || r.stdout != golden {
			t.Errorf("report --budgets: exit %d %s\n%s", r.code, r.stderr, r.stdout)
		}
		// PADDLE_MONITOR_BUDGETS sets it too.
		r = runMonitorEnv(t, t.TempDir(), []string{"PADDLE_MONITOR_BUDGETS=" + budgets}, append(append([]string{"report"}, window...), "--format", "json")...)
		if r.code != 0 || r.stdout != golden {
			t.Errorf("report with PADDLE_MONITOR_BUDGETS: exit %d %s\n%s", r.code, r.stderr, r.stdout)
		}
		// The table says each budget in words.
		r = runMonitor(t, append(append([]string{"report"}, window...), "--budgets", budgets)...)
		for _, want := range []string{
			"budget search: cost 401.00 of 500.00 (80.2 %), forecast 401.00 (80.2 %)\n",
			"budget nlp: gpu_hours 12.5 of 10.0 (125.0 %), forecast 12.5 (125.0 %)\n",
		} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("report --budgets --format table: exit %d %s; no %q in\n%s", r.code, r.stderr, want, r.stdout)
			}
		}
		// The CSV ends each row with its budget.
		r = runMonitor(t, append(append([]string{"report"}, window...), "--budgets", budgets, "--format", "csv")...)
		lines := strings.Split(r.stdout, "\n")
		if r.code != 0 || len(lines) < 4 || !strings.HasSuffix(lines[0], ",budget_kind,budget_limit,budget_used,budget_used_share,budget_forecast,budget_forecast_share") ||
			!strings.HasSuffix(lines[1], ",cost,500,401,0.802,401,0.802") || !strings.HasPrefix(lines[1], "search,") ||
			!strings.HasSuffix(lines[3], ",gpu_hours,10,12.5,1.25,12.5,1.25") || !strings.HasPrefix(lines[3], "nlp,") {
			t.Errorf("report --budgets --format csv: exit %d %s\n%s", r.code, r.stderr, r.stdout)
		}
		// GET /v1/report of serve --budgets: the same bytes.
		if a := s.do(t, get("/v1/report?from=2025-11-01&to=2025-12-01", "")); a.Status != 200 || string(a.Body) != golden {
			t.Errorf("GET /v1/report with budgets: %d\n%s", a.Status, a.Body)
		}
		// Other reports: every row's budget is null.
		for _, q := range []string{"from=2025-11-01&to=2025-12-01&by=owner", "from=2025-11-01&to=2025-11-30", "from=2025-10-01&to=2025-12-01"} {
			a := s.do(t, get("/v1/report?"+q, ""))
			if a.Status != 200 || !strings.Contains(string(a.Body), `"budget": null`) || strings.Contains(string(a.Body), `"kind"`) {
				t.Errorf("GET /v1/report?%s: %d\n%s", q, a.Status, a.Body)
			}
		}
	})
}

// A budgets file that breaks a rule stops serve and report at start, with
// the file and the field named; so does a cost budget without prices of
// its currency (naming both files).
func TestBudgetsFileErrors(t *testing.T) {
	dir := t.TempDir()
	prices := fixtureFile(t, "prices.json")
	usd := filepath.Join(dir, "usd.json")
	writeFile(t, usd, `{"currency": "USD", "default": 1}`)
	db := storetest.SQLiteDSN(t)
	startServer(t, db).Kill() // report needs a database that exists
	for i, c := range []struct {
		content string
		prices  string
		want    string
	}{
		{`{"currency": "CNY", "budgets": [{"project": "nlp"}]}`, prices, "budgets[0]: exactly one of monthly_cost and monthly_gpu_hours"},
		{`{"currency": "CNY", "budgets": [{"project": "nlp", "monthly_cost": 5, "monthly_gpu_hours": 8}]}`, prices, "budgets[0]: exactly one of monthly_cost and monthly_gpu_hours"},
		{`{"currency": "CNY", "budgets": [{"project": "a", "monthly_gpu_hours": 1}, {"project": "nlp", "monthly_gpu_hours": -8}]}`, prices, "budgets[1].monthly_gpu_hours: a limit is a number of at least 0"},
		{`{"currency": "CNY", "budgets": [{"monthly_cost": 5}]}`, prices, "budgets[0].project: required"},
		{`{"currency": "CNY", "budgets": [{"project": "[x", "monthly_cost": 5}]}`, prices, `budgets[0].project: "[x" is not a valid glob`},
		{`{"currency": "CNY", "budgets": [{"project": "a", "monthly_cost": 5}, {"project": "a", "monthly_cost": 6}]}`, prices, `budgets[1].project: "a" has a budget already`},
		{`{"currency": "CNY", "budgets": [{"project": "a", "monthly_cost": 5, "limit": 3}]}`, prices, `unknown field "limit"`},
		{`{"currency": "CNY"}`, prices, "budgets: required"},
		{`{"budgets": [`, prices, "bad budgets file"},
		{`{"currency": "CNY", "budgets": [{"project": "a", "monthly_cost": 5}]}`, "", "has cost budgets (monthly_cost, currency \"CNY\") but no prices file is set (--prices)"},
		{`{"currency": "CNY", "budgets": [{"project": "a", "monthly_cost": 5}]}`, usd, `(currency "CNY") and prices file ` + usd + ` (currency "USD"): a cost budget needs a prices file of the same currency`},
	} {
		file := filepath.Join(dir, fmt.Sprintf("budgets-%d.json", i))
		writeFile(t, file, c.content)
		args := []string{"--budgets", file}
		if c.prices != "" {
			args = append(args, "--prices", c.prices)
		}
		for _, cmd := range [][]string{
			append([]string{"serve", "--listen", "127.0.0.1:0", "--db", db}, args...),
			append([]string{"report", "--db", db, "--from", "2025-11-01", "--to", "2025-12-01"}, args...),
		} {
			r := runMonitorEnv(t, dir, nil, cmd...)
			if r.code != 1 || !strings.Contains(r.stderr, "budgets file "+file) || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s with %s: exit %d, stderr %q; want exit 1 naming the file and %q", cmd[0], c.content, r.code, r.stderr, c.want)
			}
		}
	}
	// A gpu_hours budget needs no prices.
	file := filepath.Join(dir, "gpu.json")
	writeFile(t, file, `{"budgets": [{"project": "nlp", "monthly_gpu_hours": 800}]}`)
	if r := runMonitor(t, "report", "--db", db, "--from", "2025-11-01", "--to", "2025-12-01", "--budgets", file); r.code != 0 {
		t.Errorf("a gpu_hours budget without prices: exit %d %s", r.code, r.stderr)
	}
}

// The project month series: this month's GPU-seconds and cost per project
// and the budgets' limits, in base units; computed once and served from
// the cache for a minute (a heartbeat and a new task within the minute
// change nothing), and promtool-clean.
func TestProjectMonthSeries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", fixtureFile(t, "prices.json"), "--budgets", fixtureFile(t, "budgets.json"))
		// Two T4 (price 2) from T0 − 1 h to a heartbeat at T0: 7200
		// GPU-seconds, 4 CNY. T0 is 10 minutes ago.
		now := time.Now().UTC()
		if now.Sub(facts.Month(now).From) < 2*time.Hour {
			t.Skip("the month began less than 2 hours ago: the task's hour would straddle two months")
		}
		T0 := now.Add(-10 * time.Minute).Unix()
		body := fmt.Sprintf(`{"schema_version":1,"task_id":"month-1","task_name":"train","project":"search","owner":"ann@example.com",
			"gpu_count":2,"start_time":%d,"hostname":"node-1","labels":{},
			"gpus":[{"index":0,"uuid":"GPU-m1-0","name":"Tesla T4","memory_total_bytes":1,"share":1},{"index":1,"uuid":"GPU-m1-1","name":"Tesla T4","memory_total_bytes":1,"share":1}]}`, T0-3600)
		if a := s.do(t, registerReq(body, "")); a.Status != 201 {
			t.Fatalf("register: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":"month-1","time":%d}`, T0), "")); a.Status != 200 {
			t.Fatalf("heartbeat: %d %s", a.Status, a.Body)
		}
		want := []string{
			`paddle_project_month_gpu_seconds{project="search"} 7200`,
			`paddle_project_month_cost{project="search"} 4`,
			`paddle_project_budget_cost{project="search"} 500`,
			`paddle_monitor_project_scrape_error 0`,
		}
		first := string(s.do(t, get("/metrics", "")).Body)
		for _, w := range want {
			if !strings.Contains(first, w+"\n") {
				t.Errorf("/metrics lacks %s", w)
			}
		}
		promtoolCheck(t, first)
		// Within the minute: a later heartbeat and a task of another
		// project are in the store, not in the cached series.
		if a := s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":"month-1","time":%d}`, T0+300), "")); a.Status != 200 {
			t.Fatalf("heartbeat: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, registerReq(strings.NewReplacer("month-1", "month-2", `"search"`, `"nlp"`, "GPU-m1", "GPU-m2").Replace(body), "")); a.Status != 201 {
			t.Fatalf("register: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":"month-2","time":%d}`, T0), "")); a.Status != 200 {
			t.Fatalf("heartbeat: %d %s", a.Status, a.Body)
		}
		second := string(s.do(t, get("/metrics", "")).Body)
		for _, w := range want {
			if !strings.Contains(second, w+"\n") {
				t.Errorf("the second scrape within a minute lacks %s (the series were computed again)", w)
			}
		}
		if strings.Contains(second, `paddle_project_month_gpu_seconds{project="nlp"}`) {
			t.Errorf("a task registered after the first scrape is in the series within the minute")
		}
		// The report itself is not cached: it counts the new heartbeat
		// (7800 GPU-seconds = 2.166667 h) and nlp.
		a := s.do(t, get("/v1/report", ""))
		if !strings.Contains(string(a.Body), `"gpu_hours": 2.166667`) || !strings.Contains(string(a.Body), `"project": "nlp"`) {
			t.Errorf("GET /v1/report of this month:\n%s", a.Body)
		}
	})
}

// The page shows the idle tasks first ("Idle now": task, owner, project,
// GPUs, idle for, cost so far) and each project's budget: used and
// forecast against the limit.
func TestPageIdleAndBudgets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", fixtureFile(t, "prices.json"), "--budgets", fixtureFile(t, "budgets.json"))
		postFixture(t, s, "")
		// An idle task: 2 H100 (28 each) started 2 h ago, idle for the
		// last 45 minutes of its heartbeats: 2 × 28 × 2 = 112 so far.
		now := time.Now().Unix()
		if a := s.do(t, registerReq(strings.Replace(twoGPUTask("pg", now-7200), `"finetune"`, `"stuck-loader"`, 1), "")); a.Status != 201 {
			t.Fatalf("register: %d %s", a.Status, a.Body)
		}
		hb := fmt.Sprintf(`{"task_id":"pg","time":%d,"interval_seconds":2700,"gpus":[{"uuid":"GPU-pg-0","samples":5,"util_mean":0},{"uuid":"GPU-pg-1","samples":5,"util_mean":0.2}]}`, now)
		if a := s.do(t, post("/v1/task/heartbeat", hb, "")); a.Status != 200 {
			t.Fatalf("heartbeat: %d %s", a.Status, a.Body)
		}
		a := s.do(t, request{Method: "GET", Path: "/?month=2025-11", NoSpecCheck: true})
		page := string(a.Body)
		idle, projects := strings.Index(page, "<h2>Idle now</h2>"), strings.Index(page, "<h2>GPU-hours and cost per project</h2>")
		if a.Status != 200 || idle < 0 || projects < idle {
			t.Fatalf("the page does not list the idle tasks first: %d\n%s", a.Status, page)
		}
		for _, want := range []string{
			`<td class="key" title="pg">stuck-loader</td><td class="key">cho@example.com</td><td class="key">vision</td><td>2</td><td>0 h 45 min</td><td>112.00</td>`,
			`<th>Budget used</th><th>Forecast</th>`,
			// search: 401 of a 500 cost budget; nlp: 12.5 of 10 GPU-hours.
			`<td>80 % (401.00 of 500.00)</td><td>80 % (401.00)</td>`,
			`<td>125 % (12.5 GPU-h of 10.0 GPU-h)</td><td>125 % (12.5 GPU-h)</td>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("the page lacks %s", want)
			}
		}
	})
}
