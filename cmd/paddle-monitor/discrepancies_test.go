package main

import (
	"strings"
	"testing"
)

// discrepanciesCSV is billingFleet's discrepancies at 10 a GPU-hour, by
// hand: ads_x's undeclared 10 GPU-h cost 100; t-tiny (0.1 − 10) × 10 =
// −99; t-mixed declared 6 h (60) and is billed 11 (110: 10 observed, 0.5 ×
// the 2 h no report covered): −50 (declared cost − billed cost, MONITOR.md
// 20.22; before, − observed: −40); t-never's declared hour, never
// observed, 10; by |money|. t-short, completed 1 s after its start but
// attributed its GPU 10 h, declared those 10 h (its counted end is its
// last attributed instant, MONITOR.md 20.3): no discrepancy.
const discrepanciesCSV = `kind,task_id,project,owner,node,namespace,pod,declared_gpu_hours,observed_gpu_hours,gpu_hours,money_at_stake,differences
undeclared,,ads_x,,gpu-node-1,team-b,p,,,10,100.00,
task,t-tiny,p_tiny,ann@example.com,gpu-node-1,,,0.1,10,-9.9,-99.00,share or duration
task,t-mixed,p_mixed,ann@example.com,gpu-node-1,,,6,10,-4,-50.00,share or duration
task,t-never,p_never,ann@example.com,gpu-node-1,,,1,0,1,10.00,never observed
`

// checkDiscrepancyFormats: billingFleet's discrepancies as finance reads
// them, in the CLI's CSV and table, and the API's CSV.
func checkDiscrepancyFormats(t *testing.T, s *server, dsn, prices, ns, from, to string) {
	t.Helper()
	args := []string{"discrepancies", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to}
	r := runMonitor(t, append(args, "--format", "csv")...)
	if r.code != 0 || r.stdout != discrepanciesCSV {
		t.Errorf("discrepancies --format csv: exit %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, discrepanciesCSV)
	}
	a := s.do(t, get("/v1/discrepancies?format=csv&from="+from+"&to="+to, "a-secret"))
	if a.Status != 200 || a.Header.Get("Content-Type") != "text/csv; charset=utf-8" || string(a.Body) != discrepanciesCSV {
		t.Errorf("GET /v1/discrepancies?format=csv: %d %s\n%s\nwant\n%s", a.Status, a.Header.Get("Content-Type"), a.Body, discrepanciesCSV)
	}
	r = runMonitor(t, append(args, "--format", "table")...)
	lines := strings.Split(r.stdout, "\n")
	if r.code != 0 || len(lines) < 7 || !strings.HasPrefix(lines[0], "Discrepancies ") ||
		!strings.Contains(lines[3], "undeclared") || !strings.HasSuffix(lines[3], "100.00") ||
		!strings.HasSuffix(lines[6], "10.00     never observed") {
		t.Errorf("discrepancies --format table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runMonitor(t, append(args, "--format", "pdf")...); r.code != 2 || !strings.Contains(r.stderr, "--format \"pdf\"") {
		t.Errorf("--format pdf: exit %d %s", r.code, r.stderr)
	}
}

// TestDocsDiscrepanciesExample: docs/cost.md shows the CSV that
// TestBillingFromObservations checks.
func TestDocsDiscrepanciesExample(t *testing.T) {
	for _, b := range codeBlocks(t, "../../docs/cost.md") {
		if b.lang == "csv" && strings.HasPrefix(b.text, "kind,task_id,") {
			if b.text != discrepanciesCSV {
				t.Errorf("docs/cost.md:%d shows\n%s\ndiscrepancies prints\n%s", b.line, b.text, discrepanciesCSV)
			}
			return
		}
	}
	t.Fatal("docs/cost.md has no discrepancies CSV (a csv block beginning kind,task_id,)")
}
