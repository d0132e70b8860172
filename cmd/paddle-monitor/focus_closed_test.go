package main

// A closed month is answered from what its statement froze (MONITOR.md
// section 17, invariant 3; 20.10, 20.20): its chargeback by task (CSV and
// JSON, HTTP and CLI) and its FOCUS export (CSV and csv.gz) are the bytes
// of the close, after a late registration of the month and after the
// monitor restarts; the late task is billed once, as the next month's
// correction.

import (
	"bytes"
	"compress/gzip"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestClosedMonthIsFrozen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"Tesla T4":2}}`)
		flags := []string{"--prices", prices, "--focus-provider", "acme-gpu"}
		s := startServer(t, dsn, append([]string{"--tokens", nodeTokens(t)}, flags...)...)

		oct := time.Date(2025, 10, 20, 0, 0, 0, 0, time.UTC).Unix()
		t4 := `{"index":0,"uuid":"GPU-t4","name":"Tesla T4","memory_total_bytes":1,"share":1}`
		billingTask(t, s, "t-oct", "search_a", "", t4, oct, oct+3600)
		expect(t, s.do(t, post("/v1/statements/2025-10/close", `{"reason":"October billed"}`, "a-secret")), 201, "")

		cli := func(format string) string {
			return mustRun(t, "report", "--db", dsn, "--month", "2025-10", "--prices", prices, "--by", "task", "--format", format)
		}
		type frozen struct{ csv, json, cliCSV, cliJSON, focus, focusGz, focusCLI string }
		read := func() frozen {
			t.Helper()
			var f frozen
			for _, c := range []struct {
				into *string
				path string
			}{
				{&f.csv, "/v1/report?month=2025-10&by=task&format=csv"},
				{&f.json, "/v1/report?month=2025-10&by=task&format=json"},
				{&f.focus, "/v1/export/focus?month=2025-10"},
				{&f.focusGz, "/v1/export/focus?month=2025-10&format=csv.gz"},
			} {
				a := s.do(t, get(c.path, "a-secret"))
				if a.Status != 200 {
					t.Fatalf("%s: %d %s", c.path, a.Status, a.Body)
				}
				*c.into = string(a.Body)
			}
			f.cliCSV, f.cliJSON = cli("csv"), cli("json")
			f.focusCLI = mustRun(t, append([]string{"export", "focus", "--db", dsn, "--month", "2025-10"}, flags...)...)
			return f
		}
		atClose := read()
		for what, body := range map[string]string{"CSV": atClose.csv, "JSON": atClose.json, "CLI CSV": atClose.cliCSV, "CLI JSON": atClose.cliJSON} {
			if !strings.Contains(body, "t-oct") {
				t.Errorf("the closed month's chargeback (%s) lacks its task:\n%s", what, body)
			}
		}
		if atClose.cliCSV != atClose.csv || atClose.focusCLI != atClose.focus {
			t.Errorf("the CLI and HTTP disagree on the closed month")
		}

		// A late registration of October: November's adjustment, never
		// October's chargeback or export.
		billingTask(t, s, "t-late", "search_a", "", t4, oct, oct+2*3600)
		late := read()
		if late != atClose {
			t.Errorf("the closed month's files changed after a late registration:\nat close %+v\nafter %+v", atClose, late)
		}
		if strings.Contains(late.csv, "t-late") || strings.Contains(late.json, "t-late") {
			t.Errorf("a late registration shows in the closed month's chargeback")
		}
		nov := s.do(t, get("/v1/report?month=2025-11&format=json", "a-secret"))
		if !strings.Contains(string(nov.Body), "2025-10") {
			t.Errorf("November's report does not carry the late task as an adjustment of 2025-10:\n%s", nov.Body)
		}
		novFocus := checkFocus(t, string(s.do(t, get("/v1/export/focus?month=2025-11", "a-secret")).Body), "2025-11")
		if len(novFocus) != 1 || novFocus[0]["ChargeClass"] != "Correction" || novFocus[0].num(t, "BilledCost") != 4 {
			t.Errorf("November's export is not the late task's correction (2 T4-hours, 4): %v", novFocus)
		}

		// After a restart: the same bytes; csv.gz is the CSV.
		stopServer(t, s)
		s = startServer(t, dsn, append([]string{"--tokens", nodeTokens(t)}, flags...)...)
		if restarted := read(); restarted != atClose {
			t.Errorf("the closed month's files changed after a restart")
		}
		zr, err := gzip.NewReader(bytes.NewReader([]byte(atClose.focusGz)))
		if err != nil {
			t.Fatalf("csv.gz: %v", err)
		}
		if b, _ := io.ReadAll(zr); string(b) != atClose.focus {
			t.Errorf("the closed month's csv.gz is not its CSV")
		}
		stopServer(t, s)
	})
}
