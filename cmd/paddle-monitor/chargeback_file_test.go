package main

// The chargeback file stands alone (docs/cost.md, "The chargeback
// statement"): currency, window and the closed statement's hash on every
// line, no line above the column names, and the same lines as JSON.

import (
	"encoding/csv"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestChargebackFileStandsAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", fixtureFile(t, "prices.json"))
		postFixture(t, s, "")
		prices := fixtureFile(t, "prices.json")
		cmd := []string{"report", "--db", db, "--month", "2025-11", "--prices", prices, "--by", "task"}
		check := func(what, body, sha string) {
			t.Helper()
			lines, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil || len(lines) < 2 {
				t.Fatalf("%s: %v %q", what, err, body)
			}
			if lines[0][0] != "task_id" {
				t.Errorf("%s: a line above the column names: %q", what, lines[0])
			}
			n := len(lines[0])
			if strings.Join(lines[0][n-4:], ",") != "currency,window_from,window_to,statement_sha256" {
				t.Errorf("%s: header %q", what, lines[0])
			}
			for _, l := range lines[1:] {
				if got := strings.Join(l[n-4:], ","); got != "CNY,2025-11-01T00:00:00Z,2025-12-01T00:00:00Z,"+sha {
					t.Errorf("%s: line %q ends %q", what, l[0], got)
				}
			}
		}
		open := mustRun(t, append(cmd, "--format", "csv")...)
		check("open month", open, "")
		httpOpen := s.do(t, get("/v1/report?month=2025-11&by=task&format=csv", ""))
		check("open month over HTTP", string(httpOpen.Body), "")

		a := s.do(t, post("/v1/statements/2025-11/close", "", ""))
		sha, _ := a.JSON(t)["sha256"].(string)
		if a.Status != 201 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sha) {
			t.Fatalf("close: %d %s", a.Status, a.Body)
		}
		closed := mustRun(t, append(cmd, "--format", "csv")...)
		check("closed month", closed, sha)
		check("closed month over HTTP", string(s.do(t, get("/v1/report?month=2025-11&by=task&format=csv", "")).Body), sha)
		// Another window than the month: no statement.
		check2 := mustRun(t, "report", "--db", db, "--from", "2025-11-01", "--to", "2025-11-30", "--prices", prices, "--by", "task", "--format", "csv")
		if strings.Contains(check2, sha) {
			t.Errorf("a window inside the closed month carries its hash")
		}

		// JSON: the same lines, the context once.
		var doc struct {
			From     string  `json:"window_from"`
			To       string  `json:"window_to"`
			Currency *string `json:"currency"`
			SHA      *string `json:"statement_sha256"`
			Lines    []struct {
				TaskID   string   `json:"task_id"`
				End      *string  `json:"end"`
				GPUHours float64  `json:"gpu_hours"`
				Cost     *float64 `json:"cost"`
				Basis    string   `json:"billing_basis"`
			} `json:"lines"`
		}
		js := mustRun(t, append(cmd, "--format", "json")...)
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatalf("--format json: %v\n%s", err, js)
		}
		rows, _ := csv.NewReader(strings.NewReader(closed)).ReadAll()
		if doc.From != "2025-11-01T00:00:00Z" || doc.To != "2025-12-01T00:00:00Z" || doc.Currency == nil || *doc.Currency != "CNY" ||
			doc.SHA == nil || *doc.SHA != sha || len(doc.Lines) != len(rows)-1 {
			t.Errorf("JSON head: %+v (%d lines, CSV %d)", doc, len(doc.Lines), len(rows)-1)
		}
		byID := map[string]int{}
		for i, l := range doc.Lines {
			byID[l.TaskID] = i
		}
		// By hand (monitor/report/testdata/README.md): t01 2 × T4 for 2 h
		// in November at 2 = 4 GPU-h, 8; t11 open, counted to its last
		// heartbeat.
		if l := doc.Lines[byID["t01-midnight"]]; l.GPUHours != 4 || l.Cost == nil || *l.Cost != 8 || l.Basis != "completion" || l.End == nil {
			t.Errorf("t01 in JSON: %+v", l)
		}
		if l := doc.Lines[byID["t11-open-across"]]; l.End != nil || l.Basis != "last heartbeat" {
			t.Errorf("t11 in JSON: %+v", l)
		}
		httpJSON := s.do(t, get("/v1/report?month=2025-11&by=task&format=json", ""))
		if httpJSON.Status != 200 || !strings.Contains(string(httpJSON.Body), `"statement_sha256": "`+sha+`"`) {
			t.Errorf("by=task&format=json: %d %s", httpJSON.Status, httpJSON.Body)
		}
	})
}
