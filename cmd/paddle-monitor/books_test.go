package main

// Black-box tests of a year of data: backup and restore, closing months,
// late data as adjustments, retention (docs/monitor.md, "Operating it for
// a year").

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/pgserver"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// stopServer ends a serve with SIGTERM and checks it exits 0.
func stopServer(t *testing.T, s *server) {
	t.Helper()
	s.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.Log())
	}
}

// mustRun runs the monitor and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	r := runMonitor(t, args...)
	if r.code != 0 {
		t.Fatalf("paddle-monitor %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// taskIDs are the task_ids stored in a SQLite file (read-only).
func taskIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT task_id FROM tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

// TestBackupUnderLoad: `backup` copies a SQLite store while 8 clients
// register tasks as fast as the monitor answers; every registration
// answered before a backup began is in it; the copy verifies; the longest
// write during the backups is logged (a figure, not a timed assertion).
// Then `restore` refuses the served file, and a restored store answers the
// report and the statements byte for byte as the original did at the
// backup's time.
func TestBackupUnderLoad(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "monitor.db")
	prices := fixtureFile(t, "prices.json")
	s := startServer(t, db, "--prices", prices)
	postFixture(t, s, "")
	mustRun(t, "close", "--db", db, "--month", "2025-11", "--as", "Ana Finance", "--prices", prices)

	type write struct {
		id         string
		start, end time.Time
	}
	var mu sync.Mutex
	var writes []write
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).Unix()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("load-%d-%06d", w, i)
				t0 := time.Now()
				a, err := send(s.URL, registerReq(regBody(id, "load", "ops@example.com", start+int64(i)), ""))
				if err != nil || a.Status != 201 {
					t.Errorf("registration %s: %v %d %s", id, err, a.Status, a.Body)
					return
				}
				mu.Lock()
				writes = append(writes, write{id, t0, time.Now()})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	type window struct{ from, to time.Time }
	var backups []window
	var answeredBefore []map[string]bool
	for i := range 2 {
		mu.Lock()
		before := map[string]bool{}
		for _, w := range writes {
			before[w.id] = true
		}
		mu.Unlock()
		answeredBefore = append(answeredBefore, before)
		b0 := time.Now()
		out := mustRun(t, "backup", "--db", db, "--to", filepath.Join(dir, fmt.Sprintf("backup-%d.db", i)))
		backups = append(backups, window{b0, time.Now()})
		if !strings.Contains(out, "integrity ok") || !strings.Contains(out, fmt.Sprintf("schema version %d", schemaVersion(t))) {
			t.Errorf("backup printed %q", out)
		}
		t.Logf("%s", strings.TrimSpace(out))
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	var stall, stallAll time.Duration
	for _, w := range writes {
		d := w.end.Sub(w.start)
		stallAll = max(stallAll, d)
		for _, b := range backups {
			if w.start.Before(b.to) && w.end.After(b.from) {
				stall = max(stall, d)
			}
		}
	}
	t.Logf("%d registrations under load; the longest during the backups took %v (%v over the whole load; the contract's bound is 1 s)",
		len(writes), stall, stallAll)
	for i, before := range answeredBefore {
		got := taskIDs(t, filepath.Join(dir, fmt.Sprintf("backup-%d.db", i)))
		for id := range before {
			if !got[id] {
				t.Fatalf("backup %d lacks %s, answered 201 before it began", i, id)
			}
		}
	}

	// A backup of the quiet store: the report and the statements then.
	final := filepath.Join(dir, "final.db")
	mustRun(t, "backup", "--db", db, "--to", final)
	if r := runMonitor(t, "backup", "--db", db, "--to", final); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("a second backup to the same file: exit %d %s", r.code, r.stderr)
	}
	reportArgs := []string{"--month", "2025-11", "--format", "json", "--prices", prices}
	wantReport := mustRun(t, append([]string{"report", "--db", db}, reportArgs...)...)
	wantLive := mustRun(t, append([]string{"report", "--db", db, "--live"}, reportArgs...)...)
	wantStatements := mustRun(t, "statements", "--db", db, "--json")
	if !strings.Contains(wantReport, `"closed"`) {
		t.Fatalf("the closed month's report is not its statement:\n%s", wantReport)
	}

	// In use: refused, the file untouched.
	r := runMonitor(t, "restore", "--from", final, "--db", db)
	if r.code != 1 || !strings.Contains(r.stderr, "in use") || !strings.Contains(r.stderr, "serve") {
		t.Fatalf("restore over a served store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := mustRun(t, append([]string{"report", "--db", db}, reportArgs...)...); got != wantReport {
		t.Fatal("the refused restore changed the store")
	}
	// A file that is not a backup is refused before anything is touched.
	junk := filepath.Join(dir, "junk.db")
	writeFile(t, junk, "not a database")
	if r := runMonitor(t, "restore", "--from", junk, "--db", filepath.Join(dir, "x.db")); r.code != 1 || !strings.Contains(r.stderr, "not a sound backup") {
		t.Errorf("restore of junk: exit %d %s", r.code, r.stderr)
	}

	stopServer(t, s)
	// Into a new file, and over the stopped original (kept aside).
	fresh := filepath.Join(dir, "restored.db")
	out := mustRun(t, "restore", "--from", final, "--db", fresh)
	if !strings.Contains(out, "restored "+fresh) {
		t.Errorf("restore printed %q", out)
	}
	out = mustRun(t, "restore", "--from", final, "--db", db)
	if !strings.Contains(out, "kept as "+db+".before-restore-") {
		t.Errorf("restore over a stopped store printed %q", out)
	}
	for _, path := range []string{fresh, db} {
		if got := mustRun(t, append([]string{"report", "--db", path}, reportArgs...)...); got != wantReport {
			t.Errorf("%s: report after restore differs:\n%s\nwant\n%s", path, got, wantReport)
		}
		if got := mustRun(t, append([]string{"report", "--db", path, "--live"}, reportArgs...)...); got != wantLive {
			t.Errorf("%s: live report after restore differs", path)
		}
		if got := mustRun(t, "statements", "--db", path, "--json"); got != wantStatements {
			t.Errorf("%s: statements after restore differ:\n%s\nwant\n%s", path, got, wantStatements)
		}
	}
	// The restored store serves.
	s2 := startServer(t, fresh, "--prices", prices)
	if a := s2.do(t, get("/v1/report?month=2025-11", "")); a.Status != 200 || string(a.Body) != wantReport {
		t.Errorf("GET /v1/report on the restored store: %d\n%s", a.Status, a.Body)
	}
	// And a restore is refused while it does.
	if r := runMonitor(t, "restore", "--from", final, "--db", fresh); r.code != 1 || !strings.Contains(r.stderr, "in use") {
		t.Errorf("restore over the served restored store: exit %d %s", r.code, r.stderr)
	}
}

// schemaVersion is the binary's schema version, as a fresh store holds it.
func schemaVersion(t *testing.T) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.db")
	s := startServer(t, path)
	stopServer(t, s)
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("SELECT version FROM schema_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPostgresDumpRestore: the commands docs/monitor.md gives (pg_dump
// -Fc, pg_restore into a fresh database) bring back the report and the
// statements byte for byte.
func TestPostgresDumpRestore(t *testing.T) {
	db := storetest.PostgresDSN(t)
	binDir, err := pgBinDir()
	if err != nil {
		harness.Postgres(t, err)
	}
	prices := fixtureFile(t, "prices.json")
	s := startServer(t, db, "--prices", prices)
	postFixture(t, s, "")
	if a := s.do(t, post("/v1/statements/2025-11/close", "", "")); a.Status != 201 {
		t.Fatalf("close: %d %s", a.Status, a.Body)
	}
	reportArgs := []string{"--month", "2025-11", "--format", "json", "--prices", prices}
	wantReport := mustRun(t, append([]string{"report", "--db", db}, reportArgs...)...)
	wantLive := mustRun(t, append([]string{"report", "--db", db, "--live"}, reportArgs...)...)
	wantStatements := mustRun(t, "statements", "--db", db, "--json")

	dump := filepath.Join(t.TempDir(), "monitor.dump")
	os.Chmod(filepath.Dir(dump), 0o777)
	pgURL := strings.Replace(db, "?sslmode=disable", "", 1)
	run := func(name string, args ...string) {
		t.Helper()
		c := execCommand(filepath.Join(binDir, name), args...)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("pg_dump", "--format=custom", "--file="+dump, pgURL)
	fresh := storetest.PostgresDSN(t)
	run("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+strings.Replace(fresh, "?sslmode=disable", "", 1), dump)
	if got := mustRun(t, append([]string{"report", "--db", fresh}, reportArgs...)...); got != wantReport {
		t.Errorf("report after pg_restore differs:\n%s\nwant\n%s", got, wantReport)
	}
	if got := mustRun(t, append([]string{"report", "--db", fresh, "--live"}, reportArgs...)...); got != wantLive {
		t.Errorf("live report after pg_restore differs")
	}
	if got := mustRun(t, "statements", "--db", fresh, "--json"); got != wantStatements {
		t.Errorf("statements after pg_restore differ:\n%s\nwant\n%s", got, wantStatements)
	}
	if r := runMonitor(t, "backup", "--db", db, "--to", filepath.Join(t.TempDir(), "x")); r.code != 2 || !strings.Contains(r.stderr, "pg_dump") {
		t.Errorf("backup of a PostgreSQL store: exit %d %s", r.code, r.stderr)
	}
}

// pgBinDir is where pg_dump and pg_restore are (the server's own version).
func pgBinDir() (string, error) {
	dir, err := pgserver.BinDir()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "pg_restore")); err != nil {
		return "", fmt.Errorf("no pg_restore next to initdb: %w", err)
	}
	return dir, nil
}

// adjustmentOf is an adjustment row as the report's JSON has it.
type adjustmentOf struct {
	AdjustmentOf string   `json:"adjustment_of"`
	Project      string   `json:"project"`
	GPUHours     float64  `json:"gpu_hours"`
	Cost         *float64 `json:"cost"`
	Tasks        []struct {
		TaskID   string   `json:"task_id"`
		Owner    string   `json:"owner"`
		Change   string   `json:"change"`
		GPUHours float64  `json:"gpu_hours"`
		Cost     *float64 `json:"cost"`
	} `json:"tasks"`
}

// TestCloseMonth: a closed month's report, CSV and page are its
// statement's, byte for byte, whatever arrives later; late data shows as
// adjustments of the next open month (figures by hand below); the
// statement's hash is of its body; closing is idempotent; reopening keeps
// the old version and the next close makes a new one; only an admin
// closes. On both stores.
func TestCloseMonth(t *testing.T) {
	prices := fixtureFile(t, "prices.json")
	storetest.Each(t, func(t *testing.T, db string) {
		dir := t.TempDir()
		tokens := tokensFile(t, dir)
		s := startServer(t, db, "--prices", prices, "--tokens", tokens)
		postFixture(t, s, "a-secret")
		// An open task of November (started Nov 20, seen Nov 20 01:00),
		// whose completion arrives after the close.
		nov20 := time.Date(2025, 11, 20, 0, 0, 0, 0, time.UTC).Unix()
		if a := s.do(t, registerReq(regBody("open-nov", "nlp", "ann@example.com", nov20), "a-secret")); a.Status != 201 {
			t.Fatalf("register: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":"open-nov","time":%d}`, nov20+3600), "a-secret")); a.Status != 200 {
			t.Fatalf("heartbeat: %d %s", a.Status, a.Body)
		}
		liveBefore := s.do(t, get("/v1/report?month=2025-11", "a-secret"))
		csvBefore := s.do(t, get("/v1/report?month=2025-11&format=csv", "a-secret"))

		// Only an admin closes; a month not over cannot close.
		if a := s.do(t, post("/v1/statements/2025-11/close", "", "s-secret")); a.Status != 403 {
			t.Errorf("a team token closed a month: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, post("/v1/statements/2025-11/close", "", "")); a.Status != 401 {
			t.Errorf("no token closed a month: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, post("/v1/statements/2999-01/close", "", "a-secret")); a.Status != 400 || !strings.Contains(a.Error(t), "not over") {
			t.Errorf("closing a month not over: %d %s", a.Status, a.Body)
		}
		if a := s.do(t, post("/v1/statements/2025-13/close", "", "a-secret")); a.Status != 400 || !strings.Contains(a.Error(t), "YYYY-MM") {
			t.Errorf("closing month 13: %d %s", a.Status, a.Body)
		}
		a := s.do(t, post("/v1/statements/2025-11/close", "", "a-secret"))
		if a.Status != 201 {
			t.Fatalf("close: %d %s", a.Status, a.Body)
		}
		closed := a.JSON(t)
		if closed["version"] != 1.0 || closed["closed_by"] != "finance" || closed["in_force"] != true {
			t.Errorf("close answered %s", a.Body)
		}
		if again := s.do(t, post("/v1/statements/2025-11/close", "", "a-secret")); again.Status != 200 || again.JSON(t)["sha256"] != closed["sha256"] {
			t.Errorf("closing again: %d %s", again.Status, again.Body)
		}
		if out := mustRun(t, "close", "--db", db, "--month", "2025-11", "--as", "Ana Finance"); !strings.Contains(out, "already closed: version 1") {
			t.Errorf("close command on a closed month: %q", out)
		}

		// The statement as served: the live report of the close, with the
		// closed mark.
		served := s.do(t, get("/v1/report?month=2025-11", "a-secret"))
		var withMark, want map[string]any
		json.Unmarshal(served.Body, &withMark)
		json.Unmarshal(liveBefore.Body, &want)
		mark, _ := withMark["closed"].(map[string]any)
		delete(withMark, "closed")
		if !reflect.DeepEqual(withMark, want) || mark["month"] != "2025-11" || mark["version"] != 1.0 || mark["closed_at"] != closed["closed_at"] {
			t.Errorf("the closed report is not the report at the close:\n%s\nwant\n%s", served.Body, liveBefore.Body)
		}
		servedCSV := s.do(t, get("/v1/report?month=2025-11&format=csv", "a-secret"))
		if string(servedCSV.Body) != string(csvBefore.Body) || !strings.HasPrefix(servedCSV.Header.Get("Paddle-Statement"), "2025-11; version=1; closed=") {
			t.Errorf("closed CSV: %q %s\nwant\n%s", servedCSV.Header.Get("Paddle-Statement"), servedCSV.Body, csvBefore.Body)
		}
		table := mustRun(t, "report", "--db", db, "--month", "2025-11", "--prices", prices)
		if !strings.Contains(table, "closed on "+closed["closed_at"].(string)+" (statement 2025-11 version 1)") {
			t.Errorf("the table does not say closed:\n%s", table)
		}
		page := s.do(t, request{Method: "GET", Path: "/?month=2025-11", Token: "a-secret", NoSpecCheck: true})
		if !strings.Contains(string(page.Body), "Closed on ") {
			t.Errorf("the page does not say closed")
		}

		// Late data, H100s at 28/h: a registration of November (Nov 20
		// 02:00 to 03:00: 1 h), and the completion of the open task at Nov
		// 20 02:00 (counted to its heartbeat at 01:00 at the close: 1 h
		// more).
		late := regBody("late-nov", "search_ranking", "bob@example.com", nov20+7200)
		if a := s.do(t, registerReq(late, "a-secret")); a.Status != 201 {
			t.Fatalf("late registration: %d %s", a.Status, a.Body)
		}
		for _, c := range []string{completeBody("late-nov", 0, nov20+3*3600), completeBody("open-nov", 0, nov20+2*3600)} {
			if a := s.do(t, post("/v1/task/complete", c, "a-secret")); a.Status != 200 {
				t.Fatalf("completion: %d %s", a.Status, a.Body)
			}
		}
		after := s.do(t, get("/v1/report?month=2025-11", "a-secret"))
		if string(after.Body) != string(served.Body) {
			t.Errorf("the closed month moved:\n%s\nwas\n%s", after.Body, served.Body)
		}
		if got := s.do(t, get("/v1/report?month=2025-11&format=csv", "a-secret")); string(got.Body) != string(csvBefore.Body) {
			t.Errorf("the closed month's CSV moved")
		}
		live := s.do(t, get("/v1/report?month=2025-11&live=1", "a-secret"))
		var liveRep struct {
			Closed any `json:"closed"`
			Total  struct {
				GPUHours float64 `json:"gpu_hours"`
				Cost     float64 `json:"cost"`
			} `json:"total"`
		}
		json.Unmarshal(live.Body, &liveRep)
		wantTotal := want["total"].(map[string]any)
		if liveRep.Closed != nil || liveRep.Total.GPUHours != wantTotal["gpu_hours"].(float64)+2 ||
			liveRep.Total.Cost != wantTotal["cost"].(float64)+2*28 {
			t.Errorf("live report: %s (want the statement's total + 2 GPU-hours, + 56)", live.Body)
		}
		dec := s.do(t, get("/v1/report?month=2025-12", "a-secret"))
		var decRep struct {
			Adjustments []adjustmentOf `json:"adjustments"`
		}
		json.Unmarshal(dec.Body, &decRep)
		adj, _ := json.Marshal(decRep.Adjustments)
		wantAdj := `[{"adjustment_of":"2025-11","project":"nlp","gpu_hours":1,"cost":28,"tasks":[{"task_id":"open-nov","owner":"ann@example.com","change":"completed_after_close","gpu_hours":1,"cost":28}]},` +
			`{"adjustment_of":"2025-11","project":"search_ranking","gpu_hours":1,"cost":28,"tasks":[{"task_id":"late-nov","owner":"bob@example.com","change":"late_registration","gpu_hours":1,"cost":28}]}]`
		if string(adj) != wantAdj {
			t.Errorf("December's adjustments:\n%s\nwant\n%s", adj, wantAdj)
		}
		// Every export of December says what it bills: the total plus the
		// adjustments (2 GPU-hours, 56), and the CSV lists each adjusted
		// task with the month it adjusts and why (MONITOR.md 17, 20.13).
		var decBilled struct {
			Total struct {
				GPUHours float64 `json:"gpu_hours"`
				Cost     float64 `json:"cost"`
			} `json:"total"`
			Billed *struct {
				GPUHours float64 `json:"gpu_hours"`
				Cost     float64 `json:"cost"`
			} `json:"billed"`
		}
		json.Unmarshal(dec.Body, &decBilled)
		if b := decBilled.Billed; b == nil || math.Abs(b.GPUHours-(decBilled.Total.GPUHours+2)) > 1e-9 || math.Abs(b.Cost-(decBilled.Total.Cost+56)) > 1e-9 {
			t.Errorf("December's billed: %+v, want total %+v + 2 GPU-hours, + 56", b, decBilled.Total)
		}
		decCSV, err := csv.NewReader(bytes.NewReader(s.do(t, get("/v1/report?month=2025-12&format=csv", "a-secret")).Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		col := map[string]int{}
		for i, name := range decCSV[0] {
			col[name] = i
		}
		var adjLines []string
		for _, rec := range decCSV[1:] {
			if rec[col["adjustment_of"]] != "" {
				adjLines = append(adjLines, strings.Join([]string{rec[col["project"]], rec[col["gpu_hours"]], rec[col["cost"]], rec[col["adjustment_of"]], rec[col["adjustment_reason"]]}, ","))
			}
		}
		if got, want := strings.Join(adjLines, "\n"), "nlp,1,28,2025-11,completed_after_close\nsearch_ranking,1,28,2025-11,late_registration"; got != want {
			t.Errorf("December's CSV adjustment lines:\n%s\nwant\n%s\n(file %q)", got, want, decCSV)
		}
		// The chargeback by task lists each late task's line after
		// December's own, with the month it adjusts (CSV and JSON).
		cbCSV, err := csv.NewReader(bytes.NewReader(s.do(t, get("/v1/report?month=2025-12&by=task&format=csv", "a-secret")).Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		cbCol := map[string]int{}
		for i, name := range cbCSV[0] {
			cbCol[name] = i
		}
		var cbAdj []string
		for _, rec := range cbCSV[1:] {
			if rec[cbCol["adjustment_of"]] != "" {
				cbAdj = append(cbAdj, strings.Join([]string{rec[cbCol["task_id"]], rec[cbCol["project"]], rec[cbCol["owner"]], rec[cbCol["gpu_hours"]], rec[cbCol["cost"]],
					rec[cbCol["window_from"]], rec[cbCol["adjustment_of"]], rec[cbCol["adjustment_reason"]]}, ","))
			}
		}
		if got, want := strings.Join(cbAdj, "\n"), "open-nov,nlp,ann@example.com,1,28,2025-12-01T00:00:00Z,2025-11,completed_after_close\n"+
			"late-nov,search_ranking,bob@example.com,1,28,2025-12-01T00:00:00Z,2025-11,late_registration"; got != want {
			t.Errorf("December's chargeback adjustment lines:\n%s\nwant\n%s", got, want)
		}
		var cbJSON struct {
			Adjustments []adjustmentOf `json:"adjustments"`
		}
		json.Unmarshal(s.do(t, get("/v1/report?month=2025-12&by=task&format=json", "a-secret")).Body, &cbJSON)
		if got, _ := json.Marshal(cbJSON.Adjustments); string(got) != wantAdj {
			t.Errorf("December's chargeback JSON adjustments:\n%s\nwant\n%s", got, wantAdj)
		}
		// A team token sees its own projects' adjustments only.
		var teamDec struct {
			Adjustments []adjustmentOf `json:"adjustments"`
		}
		json.Unmarshal(s.do(t, get("/v1/report?month=2025-12", "s-secret")).Body, &teamDec)
		if len(teamDec.Adjustments) != 1 || teamDec.Adjustments[0].Project != "search_ranking" {
			t.Errorf("a team's adjustments: %+v", teamDec.Adjustments)
		}
		decTable := mustRun(t, "report", "--db", db, "--month", "2025-12", "--prices", prices)
		if !strings.Contains(decTable, "adjustment of 2025-11 (closed; late data counted here), project search_ranking: 1 GPU-hours, cost 28.00, 1 task(s)") ||
			!strings.Contains(decTable, "billed this month (total + adjustments): ") {
			t.Errorf("December's table does not list the adjustment:\n%s", decTable)
		}

		// statements: the hash is of the body.
		lines := strings.Split(strings.TrimSpace(mustRun(t, "statements", "--db", db, "--json")), "\n")
		if len(lines) != 1 {
			t.Fatalf("statements: %q", lines)
		}
		var st struct {
			SHA256 string          `json:"sha256"`
			Body   json.RawMessage `json:"body"`
		}
		json.Unmarshal([]byte(lines[0]), &st)
		sum := sha256.Sum256(st.Body)
		if hex.EncodeToString(sum[:]) != st.SHA256 || st.SHA256 != closed["sha256"] {
			t.Errorf("statement hash %s, body hashes to %x", st.SHA256, sum)
		}

		// Reopen (logged), close again: version 2 with the late data; 1 kept.
		r := runMonitor(t, "close", "--db", db, "--month", "2025-11", "--reopen", "--as", "Ana Finance", "--reason", "late Slurm jobs")
		if r.code != 0 || !strings.Contains(r.stdout, "2025-11 reopened: version 1") || !strings.Contains(r.stderr, "month reopened") {
			t.Fatalf("reopen: %d %s %s", r.code, r.stdout, r.stderr)
		}
		if got := s.do(t, get("/v1/report?month=2025-11", "a-secret")); strings.Contains(string(got.Body), `"closed"`) {
			t.Errorf("a reopened month is still served closed")
		}
		out := mustRun(t, "close", "--db", db, "--month", "2025-11", "--as", "Ana Finance", "--prices", prices)
		if !strings.Contains(out, "2025-11 closed: version 2") {
			t.Errorf("close after reopen: %q", out)
		}
		list := s.do(t, get("/v1/statements", "a-secret"))
		var all struct {
			Statements []struct {
				Version    int     `json:"version"`
				InForce    bool    `json:"in_force"`
				ReopenedAt *string `json:"reopened_at"`
				SHA256     string  `json:"sha256"`
			} `json:"statements"`
		}
		json.Unmarshal(list.Body, &all)
		if len(all.Statements) != 2 || all.Statements[0].InForce || all.Statements[0].ReopenedAt == nil ||
			all.Statements[0].SHA256 != closed["sha256"] || !all.Statements[1].InForce {
			t.Errorf("statements after reopening: %s", list.Body)
		}
		if a := s.do(t, get("/v1/statements", "s-secret")); a.Status != 403 {
			t.Errorf("a team token listed statements: %d", a.Status)
		}
		var v2 struct {
			Total struct {
				GPUHours float64 `json:"gpu_hours"`
			} `json:"total"`
		}
		json.Unmarshal(s.do(t, get("/v1/report?month=2025-11", "a-secret")).Body, &v2)
		if v2.Total.GPUHours != liveRep.Total.GPUHours {
			t.Errorf("version 2 counts %v GPU-hours, the tasks %v", v2.Total.GPUHours, liveRep.Total.GPUHours)
		}
		// Its late data is in version 2 now: no adjustment left in December.
		if got := s.do(t, get("/v1/report?month=2025-12", "a-secret")); strings.Contains(string(got.Body), "adjustment_of") {
			t.Errorf("December still adjusts a month closed again:\n%s", got.Body)
		}
	})
}

// TestRetention: serve --retain deletes the tasks of closed months counted
// to before now − retain, never an open month's, never statements; the
// deletes are counted on /metrics and logged; a report over trimmed days
// is the statement for a whole closed month (by model, the task facts it
// froze, as before the trim) and a 400 naming --retain otherwise.
func TestRetention(t *testing.T) {
	prices := fixtureFile(t, "prices.json")
	storetest.Each(t, func(t *testing.T, db string) {
		// November 2025 (the fixture) will be closed; October 2025 gets
		// one task and stays open.
		s := startServer(t, db, "--prices", prices)
		postFixture(t, s, "")
		oct := time.Date(2025, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		if a := s.do(t, registerReq(regBody("october", "nlp", "ann@example.com", oct), "")); a.Status != 201 {
			t.Fatal(a.Status)
		}
		s.do(t, post("/v1/task/complete", completeBody("october", 0, oct+3600), ""))
		if a := s.do(t, post("/v1/statements/2025-11/close", "", "")); a.Status != 201 {
			t.Fatalf("close: %d %s", a.Status, a.Body)
		}
		statement := s.do(t, get("/v1/report?month=2025-11", "")).Body
		// By model: summed from the task facts the statement froze, to
		// the statement's total.
		byModel := s.do(t, get("/v1/report?month=2025-11&by=model", "")).Body
		var st, bm struct {
			Total struct {
				GPUHours float64 `json:"gpu_hours"`
			} `json:"total"`
			Closed *struct{} `json:"closed"`
		}
		if err := json.Unmarshal(statement, &st); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(byModel, &bm); err != nil || bm.Closed == nil || bm.Total.GPUHours != st.Total.GPUHours {
			t.Fatalf("November by model: %v, closed %v, %v GPU-hours, the statement's %v", err, bm.Closed, bm.Total.GPUHours, st.Total.GPUHours)
		}
		stopServer(t, s)

		// 30 days: everything before about a month ago is old enough, but
		// October is open: nothing may go (the cutoff stops at October).
		s = startServer(t, db, "--prices", prices, "--retain", "30d")
		s.waitLog(t, `"msg":"retention"`)
		if !strings.Contains(s.Log(), `"tasks_deleted":0`) {
			t.Errorf("retention deleted tasks while October is open:\n%s", s.Log())
		}
		stopServer(t, s)

		// Close October too: now both go.
		mustRun(t, "close", "--db", db, "--month", "2025-10", "--as", "Ana Finance")
		s = startServer(t, db, "--prices", prices, "--retain", "30d")
		s.waitLog(t, `"msg":"retention"`)
		if !strings.Contains(s.Log(), `"tasks_deleted":`) || strings.Contains(s.Log(), `"tasks_deleted":0`) {
			t.Fatalf("retention deleted nothing:\n%s", s.Log())
		}
		for _, l := range strings.Split(s.Log(), "\n") {
			if strings.Contains(l, `"msg":"retention"`) {
				t.Logf("%s", l) // the longest a batch held the write lock (a figure, not an assertion)
			}
		}
		metrics := string(s.do(t, request{Method: "GET", Path: "/metrics", NoSpecCheck: true}).Body)
		if !strings.Contains(metrics, `paddle_monitor_retention_deleted_total{kind="tasks"} `) ||
			strings.Contains(metrics, `paddle_monitor_retention_deleted_total{kind="tasks"} 0`) {
			t.Errorf("/metrics does not count the deletes:\n%s", grepLines(metrics, "retention"))
		}
		if got := s.do(t, get("/v1/report?month=2025-11", "")).Body; string(got) != string(statement) {
			t.Errorf("November after retention is not its statement:\n%s\nwant\n%s", got, statement)
		}
		a := s.do(t, get("/v1/report?from=2025-11-05&to=2025-11-20", ""))
		if a.Status != 400 || !strings.Contains(a.Error(t), "--retain") {
			t.Errorf("a partial window over trimmed days: %d %s", a.Status, a.Body)
		}
		// Another grouping of the closed month is its frozen task facts,
		// as before the trim (MONITOR.md 20.10).
		if a := s.do(t, get("/v1/report?month=2025-11&by=model", "")); a.Status != 200 || string(a.Body) != string(byModel) {
			t.Errorf("November by model after retention: %d %s\nwant\n%s", a.Status, a.Body, byModel)
		}
		if r := runMonitor(t, "report", "--db", db, "--from", "2025-11-05", "--to", "2025-11-20"); r.code != 2 || !strings.Contains(r.stderr, "--retain") {
			t.Errorf("report command over trimmed days: %d %s", r.code, r.stderr)
		}
		if out := mustRun(t, "statements", "--db", db); strings.Count(out, "in force") != 2 {
			t.Errorf("statements after retention: %s", out)
		}
		if a := s.do(t, get("/v1/tasks?limit=1000", "")); strings.Contains(string(a.Body), `"october"`) {
			t.Errorf("the October task is still listed")
		}
	})
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAutoClose: serve --auto-close closes the latest month that ended at
// least that long ago, as "auto-close", once; a month that was reopened
// is left to a person.
func TestAutoClose(t *testing.T) {
	db := storetest.SQLiteDSN(t)
	s := startServer(t, db, "--auto-close", "1h")
	s.waitLog(t, `"msg":"month closed"`)
	prev := time.Now().UTC().Add(-time.Hour)
	month := time.Date(prev.Year(), prev.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -1, 0).Format("2006-01")
	if !strings.Contains(s.Log(), `"month":"`+month+`","version":1,"by":"auto-close"`) {
		t.Fatalf("auto-close did not close %s:\n%s", month, s.Log())
	}
	stopServer(t, s)
	mustRun(t, "close", "--db", db, "--month", month, "--reopen", "--as", "Ana Finance", "--reason", "late data")
	s = startServer(t, db, "--auto-close", "1h")
	s.waitLog(t, `"msg":"auto-close: the month was reopened; close it by hand","logger":"paddle-monitor","month":"`+month+`"`)
	stopServer(t, s)
	out := mustRun(t, "statements", "--db", db)
	if strings.Count(out, month) != 1 || !strings.Contains(out, "reopened") {
		t.Errorf("auto-close closed a reopened month again:\n%s\n%s", out, s.Log())
	}
	if r := runMonitor(t, "serve", "--db", db, "--retain", "400x"); r.code != 2 || !strings.Contains(r.stderr, "--retain") {
		t.Errorf("serve --retain 400x: exit %d %s", r.code, r.stderr)
	}
}
