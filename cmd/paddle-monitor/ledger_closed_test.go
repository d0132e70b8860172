package main

// Black-box test of a closed month's ledger (MONITOR.md 17 invariant 3,
// 20.10): it is answered from the ledger facts its statement froze, on
// both stores, from the command line and over HTTP, for every --by and a
// team; a late node report of the month moves it only once it is
// reopened.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// closedLedgerViews are the ledger of month as a user reads it: by every
// --by from the command line in JSON, CSV and the table, over HTTP for an
// admin, by project for a team (s-secret), and the page's Fleet section.
func closedLedgerViews(t *testing.T, s *server, dsn, prices, ns, month string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, by := range []string{"node", "model", "project", "namespace", "state"} {
		for _, format := range []string{"json", "csv", "table"} {
			r := runMonitor(t, "ledger", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--month", month, "--by", by, "--format", format)
			if r.code != 0 {
				t.Fatalf("ledger --by %s --format %s: exit %d: %s", by, format, r.code, r.stderr)
			}
			out["cli "+by+" "+format] = r.stdout
		}
		a := s.do(t, get("/v1/ledger?by="+by+"&month="+month, "a-secret"))
		expect(t, a, 200, "")
		out["GET by="+by] = string(a.Body)
	}
	a := s.do(t, get("/v1/ledger?by=project&month="+month, "s-secret"))
	expect(t, a, 200, "")
	out["GET team by=project"] = string(a.Body)
	// The page's Fleet section of the month: its chart and table by
	// model (the list of use nobody declared after it is live).
	a = s.do(t, request{Method: "GET", Path: "/?month=" + month, Token: "a-secret", NoSpecCheck: true})
	if a.Status != 200 {
		t.Fatalf("the page of %s: %d %s", month, a.Status, a.Body)
	}
	page := string(a.Body)
	from, to := strings.Index(page, "<h2>Fleet</h2>"), strings.Index(page, "<h3>Use nobody declared</h3>")
	if from < 0 || to < from {
		t.Fatalf("the page of %s has no Fleet section:\n%s", month, page)
	}
	out["page Fleet"] = page[from:to]
	return out
}

// sameViews reports every view of got that differs from want.
func sameViews(t *testing.T, when string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s moved:\n%s\nwant\n%s", when, k, got[k], w)
		}
	}
}

// TestClosedMonthLedgerFrozen: last month holds ledgerFleet's hour on
// gpu-node-1 (attributed to search_x, undeclared use charged to ads_x by
// the namespace mapping, unattributed use of a host user, unallocated
// slices, the unobserved rest of the GPUs' lives). Its ledger by every
// --by, in every format and for a team, is recorded, the month closed:
// every view is byte-identical. Then a report of the month's fifth hour
// arrives late: GPU-c, a third GPU, fully used by an undeclared pod of
// team-b (1 GPU-hour, 10 CNY). The closed month's ledger still moves in
// no view, its statement's hash covering the frozen facts; reopened, the
// month is answered live and counts GPU-c; closed again, its second
// version freezes them.
func TestClosedMonthLedgerFrozen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x","kube-*":"platform"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		now := time.Now().UTC()
		last := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -1, 0)
		month := last.Format("2006-01")
		h := last.Unix() + 24*3600
		ledgerFleet(t, s, h)

		before := closedLedgerViews(t, s, dsn, prices, ns, month)
		var undeclared float64
		for _, row := range jsonRows(t, before["GET by=state"]) {
			if row["key"].(map[string]any)["state"] == "undeclared" {
				undeclared = row["gpu_hours"].(float64)
			}
		}
		if undeclared != 0.333333 || !strings.Contains(before["GET team by=project"], `"search_x"`) {
			t.Fatalf("the month's ledger before the close: undeclared %v GPU-hours (want 1/3); the team's:\n%s",
				undeclared, before["GET team by=project"])
		}
		if a := s.do(t, post("/v1/statements/"+month+"/close", "", "a-secret")); a.Status != 201 {
			t.Fatalf("close %s: %d %s", month, a.Status, a.Body)
		}
		sameViews(t, "after the close", closedLedgerViews(t, s, dsn, prices, ns, month), before)

		late := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
			"gpus":[{"uuid":"GPU-c","energy_joules":null}],
			"instances":[{"uuid":"GPU-c","gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,
			 "busy_basis":"utilization","occupied_share":1,
			 "users":[{"runtime":"containerd","container_id":"c3","pod_uid":"pod-late","namespace":"team-b","pod":"late-0",
			  "container":"x","allocated_share":1,"seen_share":1,"busy_share":1}]}]}`, h+5*3600)
		expect(t, s.do(t, post("/v1/nodes/report", late, "n-secret")), 201, "")
		sameViews(t, "after a late node report", closedLedgerViews(t, s, dsn, prices, ns, month), before)
		r := runMonitor(t, "statements", "--db", dsn, "--json")
		if r.code != 0 || !strings.Contains(r.stdout, `"ledger_facts_sha256":"`) {
			t.Errorf("statements --json: exit %d, no ledger_facts_sha256:\n%s%s", r.code, r.stdout, r.stderr)
		}

		expect(t, s.do(t, post("/v1/statements/"+month+"/reopen", `{"reason":"late node report"}`, "a-secret")), 200, "")
		reopened := closedLedgerViews(t, s, dsn, prices, ns, month)
		nodes := jsonRows(t, reopened["GET by=node"])
		if len(nodes) != 1 {
			t.Fatalf("reopened, by node: %s", reopened["GET by=node"])
		}
		// GPU-c's late hour: undeclared (team-b is ads_x's), 1 GPU-hour
		// more, 10 CNY more, beside the closed month's.
		was := jsonRows(t, before["GET by=node"])[0]
		checkFigures(t, "reopened, gpu-node-1", nodes[0], map[string]float64{
			"undeclared_gpu_hours": was["undeclared_gpu_hours"].(float64) + 1,
			"undeclared_cost":      was["undeclared_cost"].(float64) + 10,
			"attributed_gpu_hours": was["attributed_gpu_hours"].(float64),
			"check_gpu_hours":      0})
		if reopened["page Fleet"] == before["page Fleet"] {
			t.Errorf("reopened, the page's Fleet section does not count GPU-c:\n%s", reopened["page Fleet"])
		}
		if reopened["GET team by=project"] != before["GET team by=project"] {
			t.Errorf("the team's ledger moved with another project's use:\n%s\nwant\n%s", reopened["GET team by=project"], before["GET team by=project"])
		}

		if a := s.do(t, post("/v1/statements/"+month+"/close", "", "a-secret")); a.Status != 201 {
			t.Fatalf("close %s again: %d %s", month, a.Status, a.Body)
		}
		sameViews(t, "closed again", closedLedgerViews(t, s, dsn, prices, ns, month), reopened)
		if r := runMonitor(t, "statements", "--db", dsn); r.code != 0 {
			t.Errorf("statements: exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// jsonRows are a ledger's rows in JSON.
func jsonRows(t *testing.T, body string) []map[string]any {
	t.Helper()
	var l struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return l.Rows
}
