package store_test

import (
	"database/sql"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// indexFamily is a pattern of idx and, on PostgreSQL, the indexes of its
// partitions (pg_inherits): a statement on a partitioned table is served
// by the partitions' indexes of the one it names.
func indexFamily(t *testing.T, db *sql.DB, d store.Dialect, idx string) string {
	t.Helper()
	if d != store.Postgres || idx == "" {
		return idx
	}
	names := []string{regexp.QuoteMeta(idx)}
	for _, r := range query(t, db, `WITH RECURSIVE f(oid) AS (SELECT to_regclass($1)::oid
		UNION ALL SELECT i.inhrelid FROM pg_inherits i JOIN f ON i.inhparent = f.oid)
		SELECT c.relname FROM f JOIN pg_class c ON c.oid = f.oid WHERE c.relname <> $1`, idx) {
		names = append(names, regexp.QuoteMeta(r[0]))
	}
	return "(?:" + strings.Join(names, "|") + ")"
}

// partitions lists table's partitions, by name.
func partitions(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	var out []string
	for _, r := range query(t, db, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass($1) ORDER BY c.relname`, table) {
		out = append(out, r[0])
	}
	return out
}

// postgresOnly runs fn on a fresh PostgreSQL database (partitions are
// PostgreSQL's).
func postgresOnly(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("postgres", func(t *testing.T) { fn(t, storetest.PostgresDSN(t)) })
}

// TestPartitionedLayout: a new PostgreSQL store is made partitioned: the
// raw reports by day (yesterday to two days ahead of the clock, Wednesday
// 2 December 2026), the hourly tables by month (December and January),
// each with a default partition, the parents keeping their keys' and
// indexes' names; making them again, from two replicas at once, changes
// nothing and fails nowhere.
func TestPartitionedLayout(t *testing.T) {
	postgresOnly(t, func(t *testing.T, dsn string) {
		now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
		s := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
		db := store.DBForTest(s)
		want := map[string]string{
			"node_reports":    "node_reports_default node_reports_p20261201 node_reports_p20261202 node_reports_p20261203 node_reports_p20261204",
			"node_gpu_hours":  "node_gpu_hours_default node_gpu_hours_p202612 node_gpu_hours_p202701",
			"node_user_hours": "node_user_hours_default node_user_hours_p202612 node_user_hours_p202701",
		}
		check := func(when string) {
			t.Helper()
			for table, w := range want {
				if got := strings.Join(partitions(t, db, table), " "); got != w {
					t.Errorf("%s: %s's partitions: %s, want %s", when, table, got, w)
				}
			}
		}
		check("at open")
		for _, r := range query(t, db, `SELECT relname, relkind::text FROM pg_class WHERE relname IN
			('node_reports', 'node_gpu_hours', 'node_user_hours', 'node_reports_pkey', 'node_reports_time', 'node_gpu_hours_pkey', 'node_user_hours_pkey')
			ORDER BY relname`) {
			if k := map[bool]string{true: "I", false: "p"}[strings.HasSuffix(r[0], "_pkey") || strings.HasSuffix(r[0], "_time")]; r[1] != k {
				t.Errorf("%s is of kind %s, want %s", r[0], r[1], k)
			}
		}
		if left, err := s.Unpartitioned(ctx); err != nil || len(left) != 0 {
			t.Fatalf("unpartitioned: %v (%v)", left, err)
		}
		other := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, st := range []*store.Store{s, other} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = st.EnsurePartitions(ctx, now) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("two replicas making the partitions: %v", errs)
		}
		check("again")
	})
}

// TestPartitionPruning: on PostgreSQL the ledger's raw read of one day
// scans that day's partition and the next day's only (a report's span
// starts at most a day before its time), and a one-month read of each
// hourly table that month's only (EXPLAIN: no other partition, not the
// default), on the plan tests' month of 100 nodes of 8 GPUs.
func TestPartitionPruning(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a month of node reports")
	}
	postgresOnly(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadNodeHours(t, s)
		db := store.DBForTest(s)
		raw, hours := store.PruningReadsForTest()
		day := time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC).Unix()
		month, next := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		for _, c := range []struct {
			sql, table, only string
			args             []any
		}{
			// The ledger's raw read of 10 December: a report whose span
			// reaches into the day is of the day or, its interval at most
			// a day, of the next.
			{raw, "node_reports", "node_reports_p20261210 node_reports_p20261211", []any{day, day + 2*86400, day + 86400}},
			{hours[0], "node_gpu_hours", "node_gpu_hours_p202612", []any{month, next}},
			{hours[1], "node_user_hours", "node_user_hours_p202612", []any{month, next}},
		} {
			plan := strings.Join(explain(t, db, store.Postgres, store.WriteStatement{SQL: c.sql, Example: c.args}), "\n")
			scanned := map[string]bool{}
			for _, m := range regexp.MustCompile(`\bon (`+c.table+`\w*)`).FindAllStringSubmatch(plan, -1) {
				scanned[m[1]] = true
			}
			var got []string
			for n := range scanned {
				got = append(got, n)
			}
			sort.Strings(got)
			t.Logf("%s:\n%s", c.table, plan)
			if strings.Join(got, " ") != c.only {
				t.Errorf("%s: scans %v, want %s only:\n%s\n%s", c.table, got, c.only, c.sql, plan)
			}
		}
	})
}

// TestPartitionRetention: --raw-retention drops the raw reports' days
// ending by its cut whole (their partitions are gone), deletes in the day
// straddling the cut only the rows before it, and deletes the default
// partition's old rows as before; --hourly-retention drops October's
// partitions of the hourly tables once October is closed. Figures by
// hand: 240 hourly reports from 1 December, cut at 5 December 12:00.
func TestPartitionRetention(t *testing.T) {
	postgresOnly(t, func(t *testing.T, dsn string) {
		now := time.Date(2026, 12, 11, 0, 0, 0, 0, time.UTC)
		s := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
		db := store.DBForTest(s)
		d0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		if err := s.CreatePartitions(ctx, d0, now, now); err != nil {
			t.Fatal(err)
		}
		ins := func(node string, at int64) {
			t.Helper()
			if _, err := db.Exec(`INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, body, received_at)
				VALUES ($1, $2::bigint, 3600, $2::bigint - 3600, $2::bigint, '{}', 1)`, node, at); err != nil {
				t.Fatal(err)
			}
		}
		for k := range 240 {
			ins("n1", d0.Unix()+int64(k)*3600)
		}
		// Three reports of 2020, whose day has no partition: the default's.
		for k := range 3 {
			ins("old", time.Date(2020, 1, 1, k, 0, 0, 0, time.UTC).Unix())
		}
		count := func(table string) (n int64) {
			t.Helper()
			if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count("node_reports_default"); n != 3 {
			t.Fatalf("the default partition holds %d rows, want 3", n)
		}
		cut := d0.Unix() + 4*86400 + 12*3600
		n, err := s.PruneNodeReports(ctx, cut)
		// Hours 0..107 of December (4.5 days) and the 3 of 2020.
		if err != nil || n != 108+3 {
			t.Fatalf("pruned %d (%v), want 111", n, err)
		}
		got := strings.Join(partitions(t, db, "node_reports"), " ")
		if want := "node_reports_default node_reports_p20261205 node_reports_p20261206 node_reports_p20261207 node_reports_p20261208 " +
			"node_reports_p20261209 node_reports_p20261210 node_reports_p20261211 node_reports_p20261212 node_reports_p20261213"; got != want {
			t.Errorf("partitions after the prune: %s, want %s", got, want)
		}
		if a, b, c := count("node_reports_p20261205"), count("node_reports_default"), count("node_reports"); a != 12 || b != 0 || c != 240-108 {
			t.Errorf("left: %d in 5 December (want 12), %d in the default (want 0), %d in all (want 132)", a, b, c)
		}
		if n, err := s.PruneNodeReports(ctx, cut); err != nil || n != 0 {
			t.Errorf("pruning again: %d (%v), want 0", n, err)
		}
	})
}

// TestPartitionHourlyRetention: hours stored before their month's
// partition existed (the default partition's) move into it when it is
// made; --hourly-retention then drops October's partitions of both hourly
// tables whole once October is closed: 48 hours × (2 GPUs + 2 users)
// rows, by hand, and November's partition keeps its rows.
func TestPartitionHourlyRetention(t *testing.T) {
	postgresOnly(t, func(t *testing.T, dsn string) {
		s := open(t, dsn) // the clock: 15 November 2026
		db := store.DBForTest(s)
		oct := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC).Unix()
		nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
		for at := oct + 1800; at <= nov+2*86400; at += 1800 {
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 1800, "GPU-a", "GPU-b"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		count := func(table string) (n int64) {
			t.Helper()
			if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if a, b := count("node_gpu_hours_default"), count("node_user_hours_default"); a != 48*2 || b != 48*2 {
			t.Fatalf("October's hours in the default partitions: %d and %d, want 96 each", a, b)
		}
		if err := s.CreatePartitions(ctx, time.Unix(oct, 0), time.Unix(oct, 0), time.Unix(oct, 0)); err != nil {
			t.Fatal(err)
		}
		if a, b, c := count("node_gpu_hours_default"), count("node_gpu_hours_p202610"), count("node_user_hours_p202610"); a != 0 || b != 96 || c != 96 {
			t.Fatalf("after making October's partitions: %d in the default, %d and %d in October's (want 0, 96, 96)", a, b, c)
		}
		before := count("node_gpu_hours_p202611")
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		n, err := s.TrimHourly(ctx, time.Unix(nov+86400, 0))
		if err != nil || n != 48*4 {
			t.Fatalf("trimmed %d rows (%v), want %d", n, err, 48*4)
		}
		for _, table := range []string{"node_gpu_hours", "node_user_hours"} {
			if got := strings.Join(partitions(t, db, table), " "); got != table+"_default "+table+"_p202611 "+table+"_p202612" {
				t.Errorf("%s's partitions after the trim: %s", table, got)
			}
		}
		if after := count("node_gpu_hours_p202611"); after != before || after != 2*48 {
			t.Errorf("November's GPU hours: %d before, %d after, want %d", before, after, 2*(48+1))
		}
	})
}

// TestPartitionTrim: --retain with October closed drops October's hourly
// partitions whole (48 hours × 4 rows, by hand) with October's covered
// spans, and keeps November's hours and spans.
func TestPartitionTrim(t *testing.T) {
	postgresOnly(t, func(t *testing.T, dsn string) {
		s := open(t, dsn) // the clock: 15 November 2026
		db := store.DBForTest(s)
		oct := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC).Unix()
		nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
		if err := s.CreatePartitions(ctx, time.Unix(oct, 0), time.Unix(oct, 0), time.Unix(oct, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := register(s, reg("t1", "p", "o", oct+100)); err != nil {
			t.Fatal(err)
		}
		for at := oct + 1800; at <= nov+2*86400; at += 1800 {
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 1800, "GPU-a", "GPU-b"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		res, err := s.Trim(ctx, time.Unix(nov+86400, 0), 100)
		if err != nil || res.Cutoff.Unix() != nov || res.NodeHours != 48*4 {
			t.Fatalf("trim: %+v (%v), want the cutoff at 1 November and %d node hours", res, err, 48*4)
		}
		for _, table := range []string{"node_gpu_hours", "node_user_hours"} {
			if got := strings.Join(partitions(t, db, table), " "); got != table+"_default "+table+"_p202611 "+table+"_p202612" {
				t.Errorf("%s's partitions after the trim: %s", table, got)
			}
		}
		var old, kept int64
		if err := db.QueryRow("SELECT count(*) FILTER (WHERE span_end <= $1), count(*) FILTER (WHERE span_end > $1) FROM node_spans", nov).Scan(&old, &kept); err != nil {
			t.Fatal(err)
		}
		if old != 0 || kept == 0 {
			t.Errorf("spans after the trim: %d ending by 1 November (want 0), %d after (want some)", old, kept)
		}
	})
}
