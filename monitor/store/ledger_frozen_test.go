package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestClosedLedgerFrozen: October 2026 holds an hour of n1's GPU-x used
// by t1's pod (project p, attributed) and of GPU-y used by a pod of
// team-a (undeclared, q's by the mapping). Its ledger by every --by, for
// an admin and for teams of p and of q, is the same JSON before and after
// the close; a late report of October (GPU-z, another hour) moves the
// live computation but none of them. The statement's ledger_facts_sha256
// is the hash of the rows read back, and a changed row is found; without
// its ledger facts (a statement closed before migration 0020) the month
// is answered live.
func TestClosedLedgerFrozen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		oct := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		r := reg("t1", "p", "ann", oct-100, wire.RegisteredGPU{UUID: "GPU-x", Name: "NVIDIA H200", Share: ptrOf(1.0)})
		r.K8sPodUID, r.K8sNode = "pod-GPU-x", "n1"
		mustRegister(t, s, r)
		if _, err := s.StoreNodeReport(ctx, wholeReport("n1", oct+3600, 3600, "GPU-x", "GPU-y"), store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		prices, err := report.ParsePrices(strings.NewReader(`{"currency": "EUR", "default": 2.0}`))
		if err != nil {
			t.Fatal(err)
		}
		ns, err := ledger.ParseNamespaceProjects([]byte(`{"team-a": "q"}`))
		if err != nil {
			t.Fatal(err)
		}
		a := accounts.Of(s, accounts.Inputs{Prices: prices, Namespaces: ns})
		month := facts.Month(time.Unix(oct, 0).UTC())
		views := func() map[string]string {
			out := map[string]string{}
			for _, by := range []string{ledger.ByNode, ledger.ByModel, ledger.ByProject, ledger.ByNamespace, ledger.ByState} {
				for name, scope := range map[string]*access.Scope{"admin": nil, "p": {Projects: []string{"p"}}, "q": {Projects: []string{"q"}}} {
					l, err := a.Ledger(ctx, accounts.LedgerRequest{Window: month, By: by, Scope: scope})
					if err != nil {
						t.Fatal(err)
					}
					b, err := json.Marshal(l)
					if err != nil {
						t.Fatal(err)
					}
					out[by+" "+name] = string(b)
				}
			}
			return out
		}
		same := func(when string, got, want map[string]string) {
			t.Helper()
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s: %s:\n%s\nwant\n%s", when, k, got[k], w)
				}
			}
		}
		before := views()
		if !strings.Contains(before["project p"], `"attributed_gpu_hours":1,`) || !strings.Contains(before["project q"], `"undeclared_gpu_hours":1,`) ||
			strings.Contains(before["project p"], `"q"`) {
			t.Fatalf("the teams' ledgers before the close:\n%s\n%s", before["project p"], before["project q"])
		}
		c, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{Prices: prices, Namespaces: ns.Project, Ledger: a.StatementLedger()}, fixedNow())
		if err != nil {
			t.Fatal(err)
		}
		same("closed", views(), before)

		if _, err := s.StoreNodeReport(ctx, wholeReport("n1", oct+5*3600, 3600, "GPU-z"), store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		live, err := ledger.Compute(ctx, s, ledger.Query{Window: month, By: ledger.ByNode, Split: ledger.SplitEqual, Prices: prices, Namespaces: ns})
		if err != nil {
			t.Fatal(err)
		}
		liveJSON, _ := json.Marshal(live)
		if string(liveJSON) == before["node admin"] {
			t.Fatalf("the late report did not move the live ledger: %s", liveJSON)
		}
		same("after a late report", views(), before)

		body, err := s.StatementBody(ctx, c.Month, c.Version)
		if err != nil {
			t.Fatal(err)
		}
		st, err := books.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.StatementLedgerFacts(ctx, c.Month, c.Version)
		if err != nil || f == nil || len(f.Facts) == 0 || f.Currency != "EUR" || !f.Priced || f.Split != ledger.SplitEqual {
			t.Fatalf("ledger facts: %+v %v", f, err)
		}
		lines, err := f.JSONLines(month.From.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if st.LedgerFactsSHA256 == "" || books.Hash(lines) != st.LedgerFactsSHA256 {
			t.Fatalf("ledger facts hash %q, the rows read back hash %q:\n%s", st.LedgerFactsSHA256, books.Hash(lines), lines)
		}
		if ok, err := books.FactsMatch(ctx, s, c.Month, c.Version); err != nil || !ok {
			t.Fatalf("the ledger facts as frozen do not match: %v %v", ok, err)
		}
		db := store.DBForTest(s)
		if _, err := db.Exec(`UPDATE statement_ledger_facts SET gpu_hours = gpu_hours + 1 WHERE line = 1`); err != nil {
			t.Fatal(err)
		}
		if ok, err := books.FactsMatch(ctx, s, c.Month, c.Version); err != nil || ok {
			t.Fatalf("a changed ledger fact matches: %v %v", ok, err)
		}
		if _, err := db.Exec(`DELETE FROM statement_ledger_facts`); err != nil {
			t.Fatal(err)
		}
		got, err := a.Ledger(ctx, accounts.LedgerRequest{Window: month, By: ledger.ByNode})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(got); string(b) != string(liveJSON) {
			t.Errorf("without ledger facts, October is not answered live:\n%s\nwant\n%s", b, liveJSON)
		}
	})
}
