package accounts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

// now is the accounts' clock: late in November 2026, October closed.
var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func at(month time.Month, day, hour, minute int) time.Time {
	return time.Date(2026, month, day, hour, minute, 0, 0, time.UTC)
}

// inputs are testdata's prices (a Tesla T4 at 2 EUR an hour), budgets
// (search: 10 GPU-hours a month) and namespace mapping (team-c → c), as
// serve loads them and as a close stores them.
func inputs(t *testing.T) (accounts.Inputs, books.Inputs) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pj, bj, nj := read("prices.json"), read("budgets.json"), read("namespaces.json")
	prices, err := report.LoadPrices(filepath.Join("testdata", "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := report.LoadBudgets(filepath.Join("testdata", "budgets.json"), prices, "testdata/prices.json")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := ledger.ParseNamespaceProjects(nj)
	if err != nil {
		t.Fatal(err)
	}
	return accounts.Inputs{Prices: prices, Budgets: budgets, Namespaces: ns, Now: func() time.Time { return now }},
		books.Inputs{Prices: prices, Budgets: budgets, Namespaces: ns.Project, PricesJSON: pj, BudgetsJSON: bj, NamespacesJSON: nj}
}

// task stores a task of project and owner that held one whole Tesla T4
// (GPU-<id>, on node decl-1, which sends no node reports: the declared
// basis) from start for d, registered and completed.
func task(t *testing.T, s *store.Store, id, project, owner string, start time.Time, d time.Duration) {
	t.Helper()
	st, end, count, share := start.Unix(), start.Add(d).Unix(), int64(1), 1.0
	r := &wire.Registration{TaskID: id, TaskName: "train", Project: project, Owner: owner, StartTime: &st,
		K8sPodUID: "pod-" + id, K8sNode: "decl-1", Hostname: id + "-0", GPUCount: &count, Labels: wire.Labels{},
		GPUs: []wire.RegisteredGPU{{UUID: "GPU-" + id, Name: "Tesla T4", MemoryTotalBytes: 1, Share: &share}}}
	if _, err := s.Register(ctx, r, []byte(fmt.Sprintf(`{"task_id":%q}`, id)), store.Sender{}); err != nil {
		t.Fatal(err)
	}
	duration, exit := d.Seconds(), int64(0)
	c := &wire.Completion{TaskID: id, EndTime: &end, DurationSeconds: &duration, ExitCode: &exit}
	if _, err := s.Complete(ctx, c, []byte(fmt.Sprintf(`{"task_id":%q,"end_time":%d}`, id, end)), store.Sender{}); err != nil {
		t.Fatal(err)
	}
}

// idleReport stores node n1's report of its one Tesla T4 (GPU-n1),
// sampled and used by nobody, over [end − d, end).
func idleReport(t *testing.T, s *store.Store, end time.Time, d time.Duration) {
	t.Helper()
	r := &wire.NodeReport{SchemaVersion: 1, Node: "n1", Time: end.Unix(), IntervalSeconds: int64(d.Seconds()), Samples: 10,
		Instances: []wire.NodeInstance{{UUID: "GPU-n1", Name: "Tesla T4", Samples: 10, BusyBasis: wire.BusyBasisUtilization}}}
	if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
		t.Fatal(err)
	}
}

// books is the fleet of these tests, on both engines' stores:
//
//   - October (closed): search's ann 2 h (Oct 10 10:00–12:00) and bob 3 h
//     (Oct 11 10:00–13:00) on a Tesla T4: 5 GPU-hours, 10 EUR; closed
//     with the inputs on Nov 1.
//   - After the close, bob's late task of October, 1 h (Oct 20
//     10:00–11:00): an adjustment of +1 GPU-hour, +2 EUR that November
//     carries.
//   - November: search's ann 1.5 h (Nov 2 10:00–11:30): 1.5 GPU-hours,
//     3 EUR; node n1 reports its idle Tesla T4 over Nov 20 10:00–11:00.
func fleet(t *testing.T, dsn string) (*store.Store, *accounts.Accounts) {
	t.Helper()
	in, bin := inputs(t)
	s := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
	task(t, s, "oct-ann", "search", "ann", at(10, 10, 10, 0), 2*time.Hour)
	task(t, s, "oct-bob", "search", "bob", at(10, 11, 10, 0), 3*time.Hour)
	if _, created, err := books.Close(ctx, s, "2026-10", "finance", bin, at(11, 1, 0, 0)); err != nil || !created {
		t.Fatalf("close 2026-10: %v (created %v)", err, created)
	}
	task(t, s, "oct-late", "search", "bob", at(10, 20, 10, 0), time.Hour)
	task(t, s, "nov-ann", "search", "ann", at(11, 2, 10, 0), 90*time.Minute)
	idleReport(t, s, at(11, 20, 11, 0), time.Hour)
	return s, accounts.Of(s, in)
}

// ptrString is *p, or "null".
func ptrString(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
