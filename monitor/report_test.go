package monitor_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

const fixtureDir = "report/testdata"

// fixtureNow is a moment late in the fixture's month: t04 (last heartbeat
// Nov 20 06:30) and t05 (started Nov 25 12:00) were seen within the
// default --open-ttl of 168h, t06 (Oct 15) and t11 (Nov 2) were not.
var fixtureNow = time.Date(2025, 11, 26, 0, 0, 0, 0, time.UTC)

// fixturePosted is the API's clock while the fixture is posted: after its
// last event (Dec 1), since the API refuses times more than 24 hours ahead
// of its clock and clamps those less. The store, the report, the page and
// /metrics keep fixtureNow.
var fixturePosted = time.Date(2025, 12, 15, 0, 0, 0, 0, time.UTC)

// monitorWithFixture is the API over a fresh store of dsn, with the report
// mounted and the fixture posted to it, as the entrypoints would post it.
type fixtureMonitor struct {
	handler http.Handler
	reg     *prometheus.Registry
	store   *store.Store
}

func newFixtureMonitor(t *testing.T, dsn string, tokens *access.Set, adminSecret string, prices *report.Prices) *fixtureMonitor {
	t.Helper()
	st := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return fixtureNow }})
	reg := prometheus.NewRegistry()
	api := monitor.New(monitor.Config{Store: st, Registry: reg, Tokens: func() *access.Set { return tokens },
		Now: func() time.Time { return fixturePosted }})
	monitor.MountReport(api, monitor.ReportConfig{Source: st, Prices: prices, OpenTTL: 168 * time.Hour,
		Now: func() time.Time { return fixtureNow }})
	reg.MustRegister(monitor.NewTaskCollector(st, 168*time.Hour, func() time.Time { return fixtureNow }))
	m := &fixtureMonitor{handler: api, reg: reg, store: st}
	postFixture(t, m.handler, adminSecret)
	return m
}

// postFixture sends monitor/report/testdata/fixture.json's events to h in order.
func postFixture(t *testing.T, h http.Handler, token string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Events {
		for kind, body := range e {
			path := map[string]string{"register": "/v1/task/register", "complete": "/v1/task/complete", "heartbeat": "/v1/task/heartbeat"}[kind]
			req := httptest.NewRequest("POST", path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 && rec.Code != 201 {
				t.Fatalf("POST %s %s: %d %s", path, body, rec.Code, rec.Body)
			}
		}
	}
}

func get(t *testing.T, h http.Handler, path, token string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func loadPrices(t *testing.T) *report.Prices {
	t.Helper()
	p, err := report.LoadPrices(filepath.Join(fixtureDir, "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// GET /v1/report over the fixture, posted through the API, answers the
// hand-computed report in JSON, CSV and table, on SQLite and PostgreSQL.
func TestReportEndpointFixture(t *testing.T) {
	prices := loadPrices(t)
	storetest.Each(t, func(t *testing.T, dsn string) {
		m := newFixtureMonitor(t, dsn, nil, "", prices)
		for _, c := range []struct {
			query, golden, contentType string
		}{
			{"from=2025-11-01&to=2025-12-01", "november-by-project.json", "application/json"},
			{"from=2025-11-01T00:00:00Z&to=2025-12-01&by=project&format=json", "november-by-project.json", "application/json"},
			{"from=2025-11-01&to=2025-12-01&by=model", "november-by-model.json", "application/json"},
			{"from=2025-11-01&to=2025-12-01&format=csv", "november-by-project.csv", "text/csv; charset=utf-8"},
			{"from=2025-11-01&to=2025-12-01&by=model&format=csv", "november-by-model.csv", "text/csv; charset=utf-8"},
			{"from=2025-11-01&to=2025-12-01&format=table", "november-by-project.txt", "text/plain; charset=utf-8"},
			// No window: this month (the fixture's clock says November 2025).
			{"", "november-by-project.json", "application/json"},
			{"from=2025-11-01&to=2025-12-01&metric=accuracy&metric=eval.accuracy", "november-by-project-metrics.json", "application/json"},
			{"from=2025-11-01&to=2025-12-01&metric=accuracy&metric=eval.accuracy&format=csv", "november-by-project-metrics.csv", "text/csv; charset=utf-8"},
			{"from=2025-11-01&to=2025-12-01&metric=accuracy&metric=eval.accuracy&format=table", "november-by-project-metrics.txt", "text/plain; charset=utf-8"},
			{"from=2025-11-01&to=2025-12-01&by=model&metric=accuracy&metric=eval.accuracy", "november-by-model-metrics.json", "application/json"},
		} {
			rec := get(t, m.handler, "/v1/report?"+c.query, "")
			if rec.Code != 200 || rec.Header().Get("Content-Type") != c.contentType || rec.Body.String() != golden(t, c.golden) {
				t.Errorf("GET /v1/report?%s: %d %s, want %s:\n%s", c.query, rec.Code, rec.Header().Get("Content-Type"), c.golden, rec.Body)
			}
		}
		rec := get(t, m.handler, "/v1/report?from=2025-11-01&to=2025-12-01&by=project,owner&format=csv", "")
		if cd := rec.Header().Get("Content-Disposition"); cd != `attachment; filename="gpu-report_2025-11-01_2025-12-01_project-owner.csv"` {
			t.Errorf("Content-Disposition %q", cd)
		}
		// By project and owner, computed by hand from monitor/report/testdata/README.md;
		// nlp/fay and vision/cho tie at 6.5 GPU-hours: byte order of the key.
		want := "project,owner,tasks,completed_tasks,failed_tasks,gate_failed_tasks,open_tasks,gpu_hours,failed_gpu_hours,idle_gpu_hours,util_mean,waste_share,duration_est_hours,duration_actual_hours,queue_wait_mean_seconds,queue_wait_max_seconds,cost,energy_kwh,energy_cost,co2_kg\n" +
			"vision,dan,1,0,0,0,1,24,0,0,,0,0,0,,,48,,,\n" +
			"search,bob,2,2,1,1,0,22,16,5.5,69.545455,0.904545455,0,0,21600,21600,243,,,\n" +
			"search,ann@example.com,2,2,1,0,0,14,10,5.5,38.571429,0.75,12,14,1800,1800,158,,,\n" +
			"nlp,fay,2,2,1,0,0,6.5,1.5,1.5,0,0.230769231,4,5,,,13,,,\n" +
			"vision,cho,2,0,0,0,2,6.5,0,0,,0,0,0,5400,5400,182,,,\n" +
			"nlp,eve,2,2,0,0,0,6,0,0,,0,0,0,0,0,12,,,\n"
		if rec.Body.String() != want {
			t.Errorf("by project,owner:\n%s\nwant:\n%s", rec.Body, want)
		}
		// The page keeps metric in its CSV and JSON links, and only when asked.
		page := get(t, m.handler, "/?month=2025-11&metric=accuracy&metric=eval.accuracy", "").Body.String()
		for _, link := range []string{
			`href="/v1/report?by=model&amp;format=csv&amp;from=2025-11-01&amp;metric=accuracy&amp;metric=eval.accuracy&amp;to=2025-12-01"`,
			`href="/v1/report?from=2025-11-01&amp;metric=accuracy&amp;metric=eval.accuracy&amp;to=2025-12-01"`,
		} {
			if !strings.Contains(page, link) {
				t.Errorf("the page with metrics lacks %s:\n%s", link, page)
			}
		}
		if page := get(t, m.handler, "/?month=2025-11", "").Body.String(); strings.Contains(page, "metric") ||
			!strings.Contains(page, `href="/v1/report?by=model&amp;format=csv&amp;from=2025-11-01&amp;to=2025-12-01"`) {
			t.Errorf("the page without metrics:\n%s", page)
		}
	})
}

// Bad parameters are 400 with a JSON error naming the parameter.
func TestReportEndpointBadInput(t *testing.T) {
	m := newFixtureMonitor(t, storetest.SQLiteDSN(t), nil, "", nil)
	for query, wantErr := range map[string]string{
		"from=2025-13-01&to=2025-12-01":                   `from "2025-13-01" is neither RFC 3339`,
		"from=2025-11-01":                                 "to is required",
		"to=2025-11-01":                                   "from is required",
		"from=2025-12-01&to=2025-11-01":                   "from (2025-12-01T00:00:00Z) must be before to",
		"from=2025-11-01&to=2025-12-01&by=gpu":            `by: unknown key "gpu"`,
		"from=2025-11-01&to=2025-12-01&by=project,":       "by \"project,\": an empty key",
		"from=2025-11-01&to=2025-12-01&format=xml":        `parameter format: "xml" is not json, csv or table`,
		"from=2025-11-01&to=2025-12-01&by=owner,owner":    `key "owner" given twice`,
		"from=2025-11-01&to=2025-12-01&metric=a%20b":      `parameter metric "a b": a metric name is 1 to 63 letters`,
		"from=2025-11-01&to=2025-12-01&metric=":           `parameter metric "": a metric name`,
		"from=2025-11-01&to=2025-12-01&metric=x&metric=x": `parameter metric "x" given twice`,
	} {
		rec := get(t, m.handler, "/v1/report?"+query, "")
		var body struct{ Error string }
		json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != 400 || !strings.Contains(body.Error, wantErr) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET /v1/report?%s: %d %s; want 400 saying %q", query, rec.Code, rec.Body, wantErr)
		}
	}
	if rec := get(t, m.handler, "/?metric=$.x", ""); rec.Code != 400 || !strings.Contains(rec.Body.String(), `parameter metric \"$.x\": a metric name`) {
		t.Errorf("GET /?metric=$.x: %d %s", rec.Code, rec.Body)
	}
	if rec := get(t, m.handler, "/?month=2025-13", ""); rec.Code != 400 || !strings.Contains(rec.Body.String(), `parameter month: \"2025-13\" is not YYYY-MM`) {
		t.Errorf("GET /?month=2025-13: %d %s", rec.Code, rec.Body)
	}
	req := httptest.NewRequest("POST", "/v1/report", nil)
	rec := httptest.NewRecorder()
	m.handler.ServeHTTP(rec, req)
	if rec.Code != 405 {
		t.Errorf("POST /v1/report: %d", rec.Code)
	}
}

// testTokens is a tokens file with an admin and a search-only token; it
// returns their secrets.
func testTokens(t *testing.T) (set *access.Set, adminSecret, searchSecret string) {
	t.Helper()
	adminSecret, admin, err := access.Mint("admin", nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	searchSecret, search, err := access.Mint("search", []string{"SEARCH*"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"tokens": []*access.Token{admin, search}})
	if set, err = access.Parse(b, "tokens.json"); err != nil {
		t.Fatal(err)
	}
	return set, adminSecret, searchSecret
}

// With tokens, the report needs one (401 with a Basic challenge, so that a
// browser asks), and a token sees only its projects: rows and total alike.
func TestReportEndpointScope(t *testing.T) {
	tokens, admin, search := testTokens(t)
	m := newFixtureMonitor(t, storetest.SQLiteDSN(t), tokens, admin, loadPrices(t))
	for _, path := range []string{"/v1/report?from=2025-11-01&to=2025-12-01", "/?month=2025-11"} {
		rec := get(t, m.handler, path, "")
		if rec.Code != 401 || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic realm=") {
			t.Errorf("GET %s without a token: %d, WWW-Authenticate %q", path, rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
		if rec := get(t, m.handler, path, "not-a-token"); rec.Code != 401 {
			t.Errorf("GET %s with a wrong token: %d", path, rec.Code)
		}
	}
	rec := get(t, m.handler, "/v1/report?from=2025-11-01&to=2025-12-01&format=csv", search)
	want := "project,tasks,completed_tasks,failed_tasks,gate_failed_tasks,open_tasks,gpu_hours,failed_gpu_hours,idle_gpu_hours,util_mean,waste_share,duration_est_hours,duration_actual_hours,queue_wait_mean_seconds,queue_wait_max_seconds,cost,energy_kwh,energy_cost,co2_kg\n" +
		"search,4,4,2,1,0,36,26,11,57.5,0.844444444,12,14,11700,21600,401,,,\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("search token, CSV: %d\n%s\nwant:\n%s", rec.Code, rec.Body, want)
	}
	var r report.Report
	rec = get(t, m.handler, "/v1/report?from=2025-11-01&to=2025-12-01&by=model", search)
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Total.Tasks != 4 || r.Total.GPUHours != 36 || *r.Total.Cost != 401 || len(r.Rows) != 3 {
		t.Errorf("search token, by model: total %+v, %d rows", r.Total, len(r.Rows))
	}
	// HTTP Basic authentication, as a browser sends it, with any user name.
	req := httptest.NewRequest("GET", "/?month=2025-11", nil)
	req.SetBasicAuth("finance", search)
	page := httptest.NewRecorder()
	m.handler.ServeHTTP(page, req)
	if page.Code != 200 || !strings.Contains(page.Body.String(), "search") || strings.Contains(page.Body.String(), "vision") ||
		strings.Contains(page.Body.String(), "nlp") {
		t.Errorf("the page with the search token shows other projects, or fails: %d", page.Code)
	}
	if rec := get(t, m.handler, "/v1/report?from=2025-11-01&to=2025-12-01", admin); rec.Body.String() != golden(t, "november-by-project.json") {
		t.Errorf("admin token: %s", rec.Body)
	}
}
