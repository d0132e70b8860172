package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// oldSchema makes dsn a store of the release before partitions: the
// PostgreSQL migrations up to 17 applied as that release applied them,
// with a row in each of the tables migration 18 would partition were they
// empty (a January node's report and hours), so that they stay as they
// are.
func oldSchema(t *testing.T, db *sql.DB) {
	t.Helper()
	files, err := filepath.Glob("../../monitor/store/migrations/postgres/*.sql")
	if err != nil || len(files) < 18 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	sort.Strings(files)
	apply := func(files []string) {
		t.Helper()
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(string(b)); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	// Up to 16, the rows, then 17 (which keeps their day and month facts).
	apply(files[:16])
	jan := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Unix()
	for _, q := range []string{
		`INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, body, received_at)
			VALUES ('old-node', $1::bigint + 3600, 3600, $1::bigint, $1::bigint + 3600, '{}', 1)`,
		`INSERT INTO node_gpus (node, uuid, first_start, last_end, ended_at, model) VALUES ('old-node', 'GPU-old', $1::bigint, $1::bigint + 3600, $1::bigint + 3600, 'NVIDIA H200')`,
		`INSERT INTO node_spans (node, uuid, span_start, span_end) VALUES ('old-node', '', $1::bigint, $1::bigint + 3600), ('old-node', 'GPU-old', $1::bigint, $1::bigint + 3600)`,
		`INSERT INTO node_gpu_hours (hour, node, uuid, model, observed_s, unallocated_s) VALUES ($1::bigint, 'old-node', 'GPU-old', 'NVIDIA H200', 3600, 1800)`,
		`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, model, last_time, equal_s, util_s)
			VALUES ($1::bigint, 'old-node', 'GPU-old', -1, 'u', 'NVIDIA H200', $1::bigint + 3600, 1800, 1800)`,
	} {
		if _, err := db.Exec(q, jan); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	apply(files[16:17])
	for _, q := range []string{"CREATE TABLE schema_version (version INTEGER NOT NULL)", "INSERT INTO schema_version (version) VALUES (17)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// tableDigests are each table's row count and the MD5 of its rows' text,
// sorted.
func tableDigests(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{"node_reports", "node_gpu_hours", "node_user_hours", "node_gpu_days", "node_user_months", "node_spans", "tasks"} {
		var n int64
		var sum sql.NullString
		if err := db.QueryRow("SELECT count(*), md5(string_agg(r::text, '|' ORDER BY r::text)) FROM "+table+" r").Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		out[table] = fmt.Sprintf("%d rows, md5 %s", n, sum.String)
	}
	return out
}

// TestMigratePartition: a store of the release before partitions, with
// rows, upgraded by serve, stays unpartitioned and serve warns, naming
// `migrate --partition`; the node reports it then stores are the ledger
// fleet's. `paddle-monitor migrate --partition` moves the three tables to
// partitions: every row survives (each table's count and digest), the
// ledger's answers (`ledger --month 2026-01`, the old node's, and the
// fleet's window in each format) are
// byte-identical, serve no longer warns, and a second run changes nothing.
// On SQLite, --partition is a usage error.
func TestMigratePartition(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		r := runMonitor(t, "migrate", "--db", storetest.SQLiteDSN(t), "--partition")
		if r.code != 2 || !strings.Contains(r.stderr, "partitions are PostgreSQL's") {
			t.Fatalf("migrate --partition on SQLite: exit %d: %s", r.code, r.stderr)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := storetest.PostgresDSN(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		oldSchema(t, db)
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x","kube-*":"platform"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		s.waitLog(t, "tables not partitioned")
		s.waitLog(t, "node_reports,node_gpu_hours,node_user_hours")
		h := time.Now().Unix()/3600*3600 - 3*3600
		ledgerFleet(t, s, h)
		s.Stop()
		from, to := time.Unix(h, 0).UTC().Format(time.RFC3339), time.Unix(h+7200, 0).UTC().Format(time.RFC3339)
		answers := func() []string {
			t.Helper()
			var out []string
			for _, args := range [][]string{
				// The current month's capacity grows with the clock: the
				// fleet's window, and January (the old node's hours).
				{"ledger", "--from", from, "--to", to},
				{"ledger", "--from", from, "--to", to, "--by", "project", "--format", "csv"},
				{"ledger", "--from", from, "--to", to, "--format", "json"},
				{"ledger", "--month", "2026-01"},
				{"ledger", "--month", "2026-01", "--by", "model", "--format", "json"},
			} {
				r := runMonitor(t, append(args, "--db", dsn, "--prices", prices, "--namespace-projects", ns)...)
				if r.code != 0 {
					t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
				}
				out = append(out, r.stdout)
			}
			return out
		}
		rowsBefore, before := tableDigests(t, db), answers()
		if !strings.Contains(before[3], "old-node") {
			t.Errorf("January's ledger shows no old node:\n%s", before[3])
		}
		var window map[string]any
		if err := json.Unmarshal([]byte(before[2]), &window); err != nil {
			t.Fatal(err)
		}
		checkFigures(t, "the fleet's window", window["total"].(map[string]any), ledgerByHand)
		if strings.HasPrefix(rowsBefore["node_user_hours"], "1 rows") {
			t.Fatalf("no hours stored: %v", rowsBefore)
		}

		r := runMonitor(t, "migrate", "--db", dsn, "--partition")
		if r.code != 0 {
			t.Fatalf("migrate --partition: exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{fmt.Sprintf("schema version %d\n", store.SchemaVersion()), "node_reports: partitioned, ", "node_gpu_hours: partitioned, ", "node_user_hours: partitioned, "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("migrate --partition printed no %q:\n%s", want, r.stdout)
			}
		}
		for _, table := range []string{"node_reports", "node_gpu_hours", "node_user_hours"} {
			var kind string
			if err := db.QueryRow("SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", table).Scan(&kind); err != nil || kind != "p" {
				t.Errorf("%s is of kind %q (%v), want p (partitioned)", table, kind, err)
			}
		}
		if after := tableDigests(t, db); !equalMaps(after, rowsBefore) {
			t.Errorf("the rows changed:\nbefore %v\nafter  %v", rowsBefore, after)
		}
		for i, a := range answers() {
			if a != before[i] {
				t.Errorf("answer %d changed:\nbefore\n%s\nafter\n%s", i, before[i], a)
			}
		}
		r = runMonitor(t, "migrate", "--db", dsn, "--partition")
		if r.code != 0 || strings.Count(r.stdout, ": already partitioned\n") != 3 {
			t.Errorf("migrate --partition again: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		s = startServer(t, dsn, "--tokens", nodeTokens(t))
		expect(t, s.do(t, get("/v1/ledger?from="+from+"&to="+to, "a-secret")), 200, "")
		if strings.Contains(s.Log(), "not partitioned") {
			t.Errorf("serve still warns:\n%s", s.Log())
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
