package store_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestClosedGroupingsFrozen: a closed month's report by owner, by model
// and by label:team is summed from the task facts its statement froze
// (MONITOR.md 20.10): it is the live report of the month just before the
// close, byte for byte (JSON) but for the "closed" mark, and late data of
// the month stored after the close — a late registration, the completion
// of a task open at the close, a node report — leaves it as it was, while
// --live moves. By owner, ann's 2 h (t1) + 1 h (t3) of NVIDIA H200 at 2
// EUR are 3 GPU-hours, 6 EUR.
func TestClosedGroupingsFrozen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		prices, err := report.ParsePrices(strings.NewReader(`{"currency": "EUR", "default": 1.0, "models": {"NVIDIA H200": 2.0, "Tesla T4": 1.0}}`))
		if err != nil {
			t.Fatal(err)
		}
		charge := func(ns string) (string, bool) { return map[string]string{"team-a": "q"}[ns], ns == "team-a" }
		day := func(d, h int) int64 { return time.Date(2026, 10, d, h, 0, 0, 0, time.UTC).Unix() }
		h200 := wire.RegisteredGPU{UUID: "GPU-1", Name: "NVIDIA H200"}
		t4 := wire.RegisteredGPU{UUID: "GPU-2", Name: "Tesla T4"}
		for _, x := range []struct {
			r     *registration
			team  string
			hours int64
		}{
			{reg("t1", "p", "ann", day(10, 0), h200), "a", 2},
			{reg("t2", "p", "bob", day(11, 0), t4), "b", 3},
			{reg("t3", "q", "ann", day(12, 0), wire.RegisteredGPU{UUID: "GPU-3", Name: "NVIDIA H200"}), "a", 1},
			// Open at the close: counted no time yet.
			{reg("t5", "q", "carl", day(30, 0), wire.RegisteredGPU{UUID: "GPU-4", Name: "NVIDIA H200"}), "b", 0},
		} {
			x.r.Labels = wire.Labels{"team": x.team}
			mustRegister(t, s, x.r)
			if x.hours > 0 {
				mustComplete(t, s, &wire.Completion{TaskID: x.r.TaskID, EndTime: ptrOf(*x.r.StartTime + x.hours*3600),
					DurationSeconds: ptrOf(float64(x.hours * 3600)), ExitCode: ptrOf[int64](0)}, []byte(`{}`))
			}
		}
		// Two hours of a GPU no task declared, namespace team-a: charged
		// to q as undeclared use.
		for at := day(20, 0) + 1800; at <= day(20, 2); at += 1800 {
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 1800, "GPU-x"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		oct := facts.Month(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC))
		groupings := [][]string{{"owner"}, {"model"}, {"label:team"}, {"node", "env"}}
		reportOf := func(by []string, live bool) *report.Report {
			t.Helper()
			r, err := books.Report(ctx, s, report.Query{Window: oct, By: by, Prices: prices, Namespaces: charge, Now: fixedNow()}, live)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		jsonOf := func(r *report.Report) string {
			t.Helper()
			var b bytes.Buffer
			if err := report.WriteJSON(&b, r); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
		before := map[string]*report.Report{}
		for _, by := range groupings {
			before[strings.Join(by, ",")] = reportOf(by, false)
		}
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{Prices: prices, Namespaces: charge}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			t.Helper()
			for _, by := range groupings {
				name := strings.Join(by, ",")
				got := reportOf(by, false)
				if got.Closed == nil || got.Closed.Month != "2026-10" {
					t.Errorf("%s: by %s: not marked closed: %+v", when, name, got.Closed)
				}
				got.Closed = nil
				if g, w := jsonOf(got), jsonOf(before[name]); g != w {
					t.Errorf("%s: by %s:\n got %s\nwant %s", when, name, g, w)
				}
			}
		}
		check("after the close")

		byOwner := reportOf([]string{"owner"}, false)
		var ann *report.Row
		for i := range byOwner.Rows {
			if byOwner.Rows[i].Key["owner"] == "ann" {
				ann = &byOwner.Rows[i]
			}
		}
		if ann == nil || ann.GPUHours != 3 || ann.Cost == nil || *ann.Cost != 6 || ann.Tasks != 2 {
			t.Fatalf("ann's row: %+v", ann)
		}
		// The statement by project adds up to the same total: q's row is
		// t3's 1 h and the 2 h of GPU-x in team-a (four 1800-s reports
		// from 00:00 to 02:00 on October 20) charged to q, 3 GPU-hours at
		// 2 EUR, 6 EUR; p's t1 (2 h × 2) and t2 (3 h × 1), 5 h, 7 EUR.
		byProject := reportOf([]string{"project"}, false)
		rows := map[string]report.Row{}
		for _, r := range byProject.Rows {
			rows[r.Key["project"]] = r
		}
		if q, p := rows["q"], rows["p"]; q.GPUHours != 3 || q.Cost == nil || *q.Cost != 6 || p.GPUHours != 5 || p.Cost == nil || *p.Cost != 7 {
			t.Fatalf("the statement by project: q %+v, p %+v", q.Figures, p.Figures)
		}
		if byOwner.Total.GPUHours != byProject.Total.GPUHours || *byOwner.Total.Cost != *byProject.Total.Cost {
			t.Fatalf("closed by owner %v h %v, the statement by project %v h %v", byOwner.Total.GPUHours, *byOwner.Total.Cost,
				byProject.Total.GPUHours, *byProject.Total.Cost)
		}
		liveTotal := reportOf([]string{"owner"}, true).Total.GPUHours
		if got := byOwner.Total.GPUHours; got != liveTotal || got != 8 {
			t.Fatalf("closed total %v, live %v before late data, want 8", got, liveTotal)
		}

		// Late data of October.
		late := reg("t4", "p", "dan", day(15, 0), wire.RegisteredGPU{UUID: "GPU-5", Name: "NVIDIA H200"})
		mustRegister(t, s, late)
		mustComplete(t, s, &wire.Completion{TaskID: "t4", EndTime: ptrOf(day(15, 5)), DurationSeconds: ptrOf(5 * 3600.0),
			ExitCode: ptrOf[int64](0)}, []byte(`{}`))
		mustComplete(t, s, &wire.Completion{TaskID: "t5", EndTime: ptrOf(day(30, 4)), DurationSeconds: ptrOf(4 * 3600.0),
			ExitCode: ptrOf[int64](0)}, []byte(`{}`))
		if _, err := s.StoreNodeReport(ctx, wholeReport("n1", day(21, 1), 1800, "GPU-x"), store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		check("after late data")
		if got := reportOf([]string{"owner"}, true).Total.GPUHours; got <= liveTotal+8 {
			t.Errorf("--live after late data: %v GPU-hours, want more than %v + 9 (t4's 5 h, t5's 4 h)", got, liveTotal)
		}
	})
}

// TestMigrateTaskFactsFromPrevious: a store of the schema before 0019,
// with a task of October 2026 (project p, owner ann, label team=a, one
// unlisted GPU for an hour), upgrades in place; October then closes and
// freezes that task (its report by owner and by label:team is ann's and
// a's 1 GPU-hour, marked closed); a statement without frozen facts (one
// closed before 0019) is answered from the tasks, as before.
func TestMigrateTaskFactsFromPrevious(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, store.VersionBeforeForTest("0019"))
		if err != nil {
			t.Fatal(err)
		}
		oct := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		if _, err := store.DBForTest(old).Exec(`INSERT INTO tasks (task_id, task_name, project, owner, start_time, gpu_count, gpu_unlisted,
			labels, registration, registered_at, end_time, duration_seconds, exit_code, seen_at)
			VALUES ('a', 'train', 'p', 'ann', ` + itoa(oct) + `, 1, 1, '{"team":"a"}', '{}', ` + itoa(oct) + `, ` + itoa(oct+3600) + `, 3600, 0, ` + itoa(oct) + `)`); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s := open(t, dsn)
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		oct1 := facts.Month(time.Unix(oct, 0).UTC())
		for _, by := range []string{"owner", "label:team"} {
			r, err := books.Report(ctx, s, report.Query{Window: oct1, By: []string{by}}, false)
			if err != nil {
				t.Fatal(err)
			}
			if r.Closed == nil || len(r.Rows) != 1 || r.Rows[0].GPUHours != 1 || r.Rows[0].Tasks != 1 {
				t.Fatalf("by %s: %+v closed %+v", by, r.Rows, r.Closed)
			}
		}
		if _, err := store.DBForTest(s).Exec(`DELETE FROM statement_task_facts`); err != nil {
			t.Fatal(err)
		}
		r, err := books.Report(ctx, s, report.Query{Window: oct1, By: []string{"owner"}}, false)
		if err != nil || r.Closed != nil || len(r.Rows) != 1 || r.Rows[0].Key["owner"] != "ann" || r.Rows[0].GPUHours != 1 {
			t.Fatalf("without frozen facts: %+v %v", r, err)
		}
	})
}

// TestTaskFactsHash: the statement's task_facts_sha256 is the SHA-256 of
// its frozen rows as canonical JSON Lines, and the rows read back from
// the store serialise to the same bytes (nothing is lost or rounded on
// either engine): t1, a third of an NVIDIA H200 for 2 h, is 2400
// GPU-seconds, beside the observations of n1's two hours.
func TestTaskFactsHash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		oct := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		r := reg("t1", "p", "ann", oct, wire.RegisteredGPU{UUID: "GPU-1", Name: "NVIDIA H200", Share: ptrOf(1.0 / 3)})
		mustRegister(t, s, r)
		mustComplete(t, s, &wire.Completion{TaskID: "t1", EndTime: ptrOf(oct + 7200), DurationSeconds: ptrOf(7200.0), ExitCode: ptrOf[int64](0)}, []byte(`{}`))
		for at := oct + 1800; at <= oct+7200; at += 1800 {
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 1800, "GPU-x"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		c, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow())
		if err != nil {
			t.Fatal(err)
		}
		body, err := s.StatementBody(ctx, c.Month, c.Version)
		if err != nil {
			t.Fatal(err)
		}
		st, err := books.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.StatementFacts(ctx, c.Month, c.Version)
		if err != nil || f == nil {
			t.Fatalf("facts: %v %v", f, err)
		}
		lines, err := f.JSONLines(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Unix())
		if err != nil {
			t.Fatal(err)
		}
		if st.TaskFactsSHA256 == "" || books.Hash(lines) != st.TaskFactsSHA256 {
			t.Fatalf("task facts hash %q, the rows read back hash %q:\n%s", st.TaskFactsSHA256, books.Hash(lines), lines)
		}
		if len(f.Sums.GPUs) != 1 || f.Sums.GPUs[0].GPUSeconds != 2400 || f.Obs == nil || len(f.Obs.Undeclared) == 0 {
			t.Fatalf("frozen GPUs %+v, observations %+v", f.Sums.GPUs, f.Obs)
		}
		// `statements` checks the rows against the hash: a second more of
		// t1's GPU is found.
		if ok, err := books.FactsMatch(ctx, s, c.Month, c.Version); err != nil || !ok {
			t.Fatalf("the facts as frozen do not match: %v %v", ok, err)
		}
		if _, err := store.DBForTest(s).Exec(`UPDATE statement_task_facts SET gpu_s = gpu_s + 1 WHERE kind = 'gpu'`); err != nil {
			t.Fatal(err)
		}
		if ok, err := books.FactsMatch(ctx, s, c.Month, c.Version); err != nil || ok {
			t.Fatalf("a changed fact row matches: %v %v", ok, err)
		}
	})
}

// TestClosedChargebackKeptAtClose: a closed month's chargeback lines are
// kept in the close's transaction (invariant 3): a task of October
// registered after the close, and asked for before anyone read the
// chargeback, is not one of its lines (it is November's adjustment), so
// the lines stay t1's 2 GPU-hours at 2 EUR, 4 EUR — the statement's total.
func TestClosedChargebackKeptAtClose(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		prices, err := report.ParsePrices(strings.NewReader(`{"currency": "EUR", "default": 2.0}`))
		if err != nil {
			t.Fatal(err)
		}
		oct := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		mustRegister(t, s, reg("t1", "p", "ann", oct, wire.RegisteredGPU{UUID: "GPU-1", Name: "NVIDIA H200"}))
		mustComplete(t, s, &wire.Completion{TaskID: "t1", EndTime: ptrOf(oct + 7200), DurationSeconds: ptrOf(7200.0), ExitCode: ptrOf[int64](0)}, []byte(`{}`))
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{Prices: prices}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		mustRegister(t, s, reg("late", "p", "bob", oct+3600, wire.RegisteredGPU{UUID: "GPU-2", Name: "NVIDIA H200"}))
		mustComplete(t, s, &wire.Completion{TaskID: "late", EndTime: ptrOf(oct + 3*3600), DurationSeconds: ptrOf(7200.0), ExitCode: ptrOf[int64](0)}, []byte(`{}`))
		w := facts.Month(time.Unix(oct, 0).UTC())
		cb, err := books.Chargeback(ctx, s, s, report.Query{Window: w, Prices: prices})
		if err != nil {
			t.Fatal(err)
		}
		if len(cb.Lines) != 1 || cb.Lines[0].TaskID != "t1" || cb.Lines[0].GPUHours != 2 || cb.Lines[0].Cost == nil || *cb.Lines[0].Cost != 4 {
			for _, l := range cb.Lines {
				t.Logf("line %s %v h", l.TaskID, l.GPUHours)
			}
			t.Fatalf("October's chargeback after a late task: %d lines", len(cb.Lines))
		}
	})
}

// TestClosedEmptyMonthFrozen: a month closed without a task froze its
// facts all the same (their first row says so): a task of it registered
// after the close is no row of its report by owner (0 rows, 0 GPU-hours),
// where the live report has its 1 GPU-hour.
func TestClosedEmptyMonthFrozen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		oct := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		mustRegister(t, s, reg("late", "p", "ann", oct, wire.RegisteredGPU{UUID: "GPU-1", Name: "NVIDIA H200"}))
		mustComplete(t, s, &wire.Completion{TaskID: "late", EndTime: ptrOf(oct + 3600), DurationSeconds: ptrOf(3600.0), ExitCode: ptrOf[int64](0)}, []byte(`{}`))
		w := facts.Month(time.Unix(oct, 0).UTC())
		for _, live := range []bool{false, true} {
			r, err := books.Report(ctx, s, report.Query{Window: w, By: []string{"owner"}}, live)
			if err != nil {
				t.Fatal(err)
			}
			want := 0.0
			if live {
				want = 1
			}
			if (r.Closed == nil) != live || r.Total.GPUHours != want {
				t.Errorf("live %v: closed %+v, %v GPU-hours, want %v", live, r.Closed, r.Total.GPUHours, want)
			}
		}
	})
}
