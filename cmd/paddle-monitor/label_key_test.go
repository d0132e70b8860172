package main

// --by label:NAME (and by=label:NAME): any extra label as a grouping key,
// tasks without it in the "" row, on both stores; in the table, CSV and
// JSON.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// labelled registers and completes a task of November 2025: gpus H100s
// from start (Unix) for hours, with the labels JSON object.
func labelled(t *testing.T, s *server, id, project, labels string, gpus int, start int64, hours float64) {
	t.Helper()
	var list []string
	for i := range gpus {
		list = append(list, fmt.Sprintf(`{"index":%d,"uuid":"GPU-%s-%d","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85520809984}`, i, id, i))
	}
	body := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":"o@example.com","gpu_count":%d,
		"start_time":%d,"hostname":"node-1","labels":%s,"gpus":[%s]}`, id, project, gpus, start, labels, strings.Join(list, ","))
	expect(t, s.do(t, registerReq(body, "")), 201, "")
	end := start + int64(hours*3600)
	c := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%g,"exit_code":0,"gpu_count":%d,"gpu_seconds":%g,"gpus":[]}`,
		id, start, end, hours*3600, gpus, float64(gpus)*hours*3600)
	r := post("/v1/task/complete", c, "")
	r.Header = map[string]string{"Idempotency-Key": id + "/complete", "User-Agent": "paddle-entrypoint/test"}
	if a := s.do(t, r); a.Status != 200 {
		t.Fatalf("complete %s: %d %s", id, a.Status, a.Body)
	}
}

func TestReportByLabel(t *testing.T) {
	prices := fixtureFile(t, "prices.json") // H100 80GB*: 28 per GPU-hour
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		nov10 := int64(1762732800)                                                               // 2025-11-10T00:00:00Z
		labelled(t, s, "lb-1", "search", `{"cost_center":"cc-1","team":"ranking"}`, 2, nov10, 1) // 2 GPU-h, 56
		labelled(t, s, "lb-2", "search", `{"cost_center":"cc-2"}`, 1, nov10+7200, 2)             // 2 GPU-h, 56
		labelled(t, s, "lb-3", "vision", `{}`, 1, nov10+86400, 3)                                // 3 GPU-h, 84
		labelled(t, s, "lb-4", "vision", `{"cost_center":"cc-1"}`, 1, nov10+2*86400, 0.5)        // 0.5 GPU-h, 14
		base := []string{"report", "--db", db, "--month", "2025-11", "--prices", prices}

		r := runMonitor(t, append(base, "--by", "label:cost_center", "--format", "csv", "--columns", "x")...)
		if r.code != 2 || !strings.Contains(r.stderr, "--columns") {
			t.Errorf("--columns with csv: exit %d %s", r.code, r.stderr)
		}
		r = runMonitor(t, append(base, "--by", "label:COST_CENTER", "--format", "csv")...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		want := []string{"label:cost_center,tasks,", ",1,", "cc-1,2,", "cc-2,1,"}
		if r.code != 0 || len(lines) != 4 {
			t.Fatalf("CSV by label: exit %d %s\n%s", r.code, r.stderr, r.stdout)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("CSV line %d %q, want it to start %q", i, lines[i], w)
			}
		}
		// Hours and cost by hand: "" 3 GPU-h 84; cc-1 2.5 GPU-h 70; cc-2 2 GPU-h 56.
		for _, w := range []string{",3,", ",84,", ",2.5,", ",70,", ",56,"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("CSV lacks %q:\n%s", w, r.stdout)
			}
		}
		r = runMonitor(t, append(base, "--by", "project,label:team")...)
		for _, w := range []string{
			"\nproject  label:team  tasks  gpu_hours    cost",
			"\nvision   -               2       3.50   98.00",
			"\nsearch   ranking         1       2.00   56.00",
			"\nsearch   -               1       2.00   56.00",
		} {
			if r.code != 0 || !strings.Contains(r.stdout, w) {
				t.Errorf("table by project,label:team lacks %q: exit %d %s\n%s", w, r.code, r.stderr, r.stdout)
			}
		}
		a := s.do(t, get("/v1/report?month=2025-11&by=label:cost_center", ""))
		var rep struct {
			By   []string `json:"by"`
			Rows []struct {
				Key      map[string]string `json:"key"`
				GPUHours float64           `json:"gpu_hours"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(a.Body, &rep); err != nil || a.Status != 200 {
			t.Fatalf("GET by=label:cost_center: %d %s", a.Status, a.Body)
		}
		got := fmt.Sprint(rep.By, len(rep.Rows))
		for _, row := range rep.Rows {
			got += fmt.Sprintf(" %q=%g", row.Key["label:cost_center"], row.GPUHours)
		}
		if want := `[label:cost_center] 3 ""=3 "cc-1"=2.5 "cc-2"=2`; got != want {
			t.Errorf("JSON by label: %s, want %s", got, want)
		}
		// The page: a table by the label, and its CSV link.
		page := string(s.do(t, request{Method: "GET", Path: "/?month=2025-11&by=label:cost_center", NoSpecCheck: true}).Body)
		i := strings.Index(page, `<table class="label">`)
		if i < 0 {
			t.Fatalf("the page by label has no label table:\n%s", page)
		}
		table, _, _ := strings.Cut(page[i:], "</table>")
		for _, w := range []string{
			`<th class="key">cost_center</th>`,
			`<tr><td class="key">(none)</td><td>3.00</td><td>0 %</td><td>1</td></tr>`,
			`<tr><td class="key">cc-1</td><td>2.50</td><td>0 %</td><td>2</td></tr>`,
			`<tr><td class="key">cc-2</td><td>2.00</td><td>0 %</td><td>1</td></tr>`,
		} {
			if !strings.Contains(table, w) {
				t.Errorf("the page's label table lacks %s:\n%s", w, table)
			}
		}
		if !strings.Contains(page, `by=label%3Acost_center&amp;format=csv`) {
			t.Errorf("the page has no CSV link by the label")
		}
		if a := s.do(t, request{Method: "GET", Path: "/?by=owner", NoSpecCheck: true}); a.Status != 400 {
			t.Errorf("page by=owner: %d, want 400", a.Status)
		}
		for _, bad := range []string{"label:", "label:cost center", "label:-x"} {
			if a := s.do(t, get("/v1/report?month=2025-11&by="+strings.ReplaceAll(bad, " ", "%20"), "")); a.Status != 400 ||
				!strings.Contains(a.Error(t), "NAME must be 1 to") {
				t.Errorf("by=%s: %d %s", bad, a.Status, a.Body)
			}
		}
	})
}
