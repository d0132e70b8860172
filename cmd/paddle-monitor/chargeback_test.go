package main

// The chargeback statement: report --by task --format csv (and
// by=task&format=csv, the page's "CSV by task" link), one line per task of
// the window, adding up to the report by project, on both stores.

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestChargebackSumsToProjects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		postFixture(t, s, "")
		postFixtureFile(t, s, "", "fixture-mig.json")
		for _, c := range []struct{ month, prices string }{{"2025-11", "prices.json"}, {"2025-12", "prices-mig.json"}} {
			prices := fixtureFile(t, c.prices)
			base := []string{"report", "--db", db, "--month", c.month, "--prices", prices}
			r := runMonitor(t, append(base, "--by", "task", "--format", "csv")...)
			if r.code != 0 {
				t.Fatalf("--by task: exit %d %s", r.code, r.stderr)
			}
			lines, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
			if err != nil || len(lines) < 2 {
				t.Fatalf("statement %q: %v", r.stdout, err)
			}
			head := strings.Join(lines[0], ",")
			if want := "task_id,task_name,project,owner,"; !strings.HasPrefix(head, want) ||
				!strings.HasSuffix(head, ",start,end,gpus,gpu_hours,price_per_hour,cost,energy_kwh,billing_basis,currency,window_from,window_to,statement_sha256") {
				t.Errorf("header %q", head)
			}
			col := map[string]int{}
			for i, h := range lines[0] {
				col[h] = i
			}
			hours, cost := map[string]float64{}, map[string]float64{}
			for _, l := range lines[1:] {
				h, _ := strconv.ParseFloat(l[col["gpu_hours"]], 64)
				c, _ := strconv.ParseFloat(l[col["cost"]], 64)
				hours[l[col["project"]]] += h
				cost[l[col["project"]]] += c
			}
			var rep struct {
				Rows []struct {
					Key      map[string]string `json:"key"`
					GPUHours float64           `json:"gpu_hours"`
					Cost     float64           `json:"cost"`
				} `json:"rows"`
			}
			j := runMonitor(t, append(base, "--format", "json")...)
			if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != len(hours) {
				t.Errorf("%s: %d projects in the statement, %d in the report", c.month, len(hours), len(rep.Rows))
			}
			for _, row := range rep.Rows {
				p := row.Key["project"]
				if math.Abs(hours[p]-row.GPUHours) > 1e-6 || math.Abs(cost[p]-row.Cost) > 1e-6 {
					t.Errorf("%s %s: statement %v GPU-h, %v; report %v GPU-h, %v", c.month, p, hours[p], cost[p], row.GPUHours, row.Cost)
				}
			}
			if c.month != "2025-11" {
				continue
			}
			// Lines by hand (monitor/report/testdata/README.md): t01 2 of its 4 hours
			// in November × 2 T4 at 2; t07 2 GPUs from device nodes at the
			// default 2; w05 4 of 8 hours and half of its 3 kWh.
			for _, want := range []string{
				"t01-midnight,train-ranker,search,ann@example.com,2025-10-31T22:00:00Z,2025-11-01T02:00:00Z,2 × Tesla T4,4,4,8,,completion",
				"t07-device-nodes,train-lm,nlp,eve,2025-11-05T00:00:00Z,2025-11-05T03:00:00Z,\"2 × (device node, no model)\",6,4,12,,completion",
				"w05-across,train-detector,vision,dan,2025-11-30T20:00:00Z,2025-12-01T04:00:00Z,1 × NVIDIA A100-SXM4-80GB,4,15,60,1.5,completion",
				"t11-open-across,",
			} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("statement lacks %q:\n%s", want, r.stdout)
				}
			}
			if !strings.Contains(r.stdout, ",running,1 × Tesla T4,24,2,48,,last heartbeat") {
				t.Errorf("the open task t11 is not a running line counted to its last heartbeat:\n%s", r.stdout)
			}
			// The same over HTTP, and the page links to it.
			a := s.do(t, get("/v1/report?month=2025-11&by=task&format=csv", ""))
			if a.Status != 200 || !strings.HasPrefix(string(a.Body), "task_id,task_name,project,owner,") {
				t.Errorf("GET by=task&format=csv: %d %s", a.Status, a.Body)
			}
			if a := s.do(t, get("/v1/report?month=2025-11&by=task&format=table", "")); a.Status != 400 || !strings.Contains(a.Error(t), "format=csv or json") {
				t.Errorf("GET by=task as a table: %d %s", a.Status, a.Body)
			}
			page := string(s.do(t, request{Method: "GET", Path: "/?month=2025-11", NoSpecCheck: true}).Body)
			if !strings.Contains(page, `by=task&amp;format=csv`) || !strings.Contains(page, "CSV by task") {
				t.Errorf("the page has no CSV by task link")
			}
		}
		if r := runMonitor(t, "report", "--db", db, "--by", "task"); r.code != 2 || !strings.Contains(r.stderr, "--format csv") {
			t.Errorf("--by task as a table: exit %d %s", r.code, r.stderr)
		}
	})
}

// TestChargebackFromObservations: with node reports covering the window
// (billingFleet), each task's line carries its billed figures and billing
// basis (billingByHand), undeclared use charged to a project has a line
// of its own (no task), and the lines add up to the report's total.
func TestChargebackFromObservations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		h := time.Now().Unix()/3600*3600 - 20*3600
		billingFleet(t, s, h)
		from, to := time.Unix(h, 0).UTC().Format(time.RFC3339), time.Unix(h+12*3600, 0).UTC().Format(time.RFC3339)
		args := []string{"report", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to}
		r := runMonitor(t, append(args, "--by", "task", "--format", "csv")...)
		if r.code != 0 {
			t.Fatalf("--by task: exit %d %s", r.code, r.stderr)
		}
		lines, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		if err != nil || len(lines) < 2 {
			t.Fatalf("statement %q: %v", r.stdout, err)
		}
		col := map[string]int{}
		for i, h := range lines[0] {
			col[h] = i
		}
		type fig struct {
			hours, cost, kwh float64
			basis            string
		}
		// By hand (billingByHand): the undeclared line is keyed by its
		// project, ads_x, with no task_id. t-decl's node sends no reports:
		// its line keeps its own label, "completion", whatever other
		// nodes' reports cover (MONITOR.md 17, invariant 4), while its
		// project's row is billed "declared".
		want := map[string]fig{
			"t-tiny": {10, 100, 10, "observed"}, "t-short": {10, 100, 0, "observed"},
			"t-exec": {10, 100, 0, "observed"}, "t-mixed": {11, 110, 0, "mixed"},
			"t-mig": {30.0 / 7, 50, 0, "observed"}, "t-never": {0, 0, 0, "observed"},
			"t-decl": {3, 30, 0, "completion"}, "ads_x": {10, 100, 0, "observed"},
		}
		var sumHours, sumCost float64
		for _, l := range lines[1:] {
			id := l[col["task_id"]]
			if id == "" {
				id = l[col["project"]]
				if !strings.Contains(l[col["gpus"]], "namespace team-b") {
					t.Errorf("undeclared line's gpus %q", l[col["gpus"]])
				}
			}
			w, ok := want[id]
			if !ok {
				t.Errorf("line %q not expected", l)
				continue
			}
			delete(want, id)
			h, _ := strconv.ParseFloat(l[col["gpu_hours"]], 64)
			c, _ := strconv.ParseFloat(l[col["cost"]], 64)
			e, _ := strconv.ParseFloat(l[col["energy_kwh"]], 64)
			sumHours += h
			sumCost += c
			if math.Abs(h-w.hours) > 1e-6 || math.Abs(c-w.cost) > 1e-6 || math.Abs(e-w.kwh) > 1e-6 || l[col["billing_basis"]] != w.basis {
				t.Errorf("%s: %v GPU-h, %v, %v kWh, %s; want %+v", id, h, c, e, l[col["billing_basis"]], w)
			}
		}
		for id := range want {
			t.Errorf("no line for %s:\n%s", id, r.stdout)
		}
		j := runMonitor(t, append(args, "--format", "json")...)
		rep := decodeReport(t, j.stdout)
		total := rep["total"].(map[string]any)
		if math.Abs(sumHours-total["gpu_hours"].(float64)) > 1e-5 || math.Abs(sumCost-total["cost"].(float64)) > 1e-5 {
			t.Errorf("lines sum to %v GPU-h, %v; report total %v, %v", sumHours, sumCost, total["gpu_hours"], total["cost"])
		}
		// The same over HTTP.
		a := s.do(t, get("/v1/report?from="+from+"&to="+to+"&by=task&format=csv", "a-secret"))
		if a.Status != 200 || string(a.Body) != r.stdout {
			t.Errorf("GET by=task&format=csv: %d\n%s\nwant\n%s", a.Status, a.Body, r.stdout)
		}
	})
}
