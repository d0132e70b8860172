package store

// Closed months (docs/monitor.md, "Operating it for a year"): the store
// keeps each version of a month's statement, as the books package builds
// it, and finds the late data of closed months.
//
// A close is consistent: the statement, the task cut (the largest
// tasks.id) and the open tasks it records all describe one state of the
// store (CloseMonth: on PostgreSQL under LOCK TABLE … IN SHARE MODE, which
// holds writers for the month's reports; on SQLite in a read snapshot,
// beside the writers).
//
// Late data of a closed month M, found later:
//   - a task registered after the close (id > task_cut) that started
//     before M's end: through tasks_registration_lag, since such a task
//     registered at least (closed_at − M's end) after its start;
//   - a completion or a heartbeat of a task that was open at the close,
//     not yet seen past M's end and seen within --open-ttl before it
//     (statement_open, with its last_seen then).
//
// Tasks already seen past M's end when it closed are settled for M: a
// task's counted end only moves forward. A task open and not seen for
// --open-ttl before M's end (an exec-mode task started long before) is not
// watched: a late completion of one changes M's live figures (--live, and
// the next version after a reopen) but is not listed as an adjustment.
// Watching every such task would make each open month's report read all
// of them.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/report"
)

// Statement statements with the index each uses (plans checked by
// TestBooksPlans on both engines, like the write path's).
var (
	stmtStatementInForce = &stmt{sql: `SELECT month, version, closed_at, closed_by, reopened_at, reopened_by, task_cut, sha256
		FROM statements WHERE month = ? AND reopened_at IS NULL ORDER BY version DESC LIMIT 1`,
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"2026-11"}}
	stmtStatementVersions = &stmt{sql: `SELECT month, version, closed_at, closed_by, reopened_at, reopened_by, task_cut, sha256
		FROM statements ORDER BY month, version`}
	stmtStatementBody = &stmt{sql: "SELECT body FROM statements WHERE month = ? AND version = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"2026-11", int64(1)}}
	stmtStatementByProject = &stmt{sql: "SELECT by_project FROM statements WHERE month = ? AND version = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"2026-11", int64(1)}}
	stmtStatementByProjectOwner = &stmt{sql: "SELECT by_project_owner FROM statements WHERE month = ? AND version = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"2026-11", int64(1)}}
	stmtLastVersion = &stmt{sql: "SELECT COALESCE(MAX(version), 0) FROM statements WHERE month = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"2026-11"}}
	stmtInsertStatement = &stmt{sql: `INSERT INTO statements (month, version, closed_at, closed_by, task_cut, body, sha256, by_project, by_project_owner)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, example: []any{"2026-11", int64(1), int64(1), "a", int64(1), "{}", "x", "{}", "{}"}}
	stmtReopen = &stmt{sql: "UPDATE statements SET reopened_at = ?, reopened_by = ? WHERE month = ? AND version = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{int64(1), "a", "2026-11", int64(1)}}
	stmtAdvanceCut = &stmt{sql: "UPDATE statements SET task_cut = ? WHERE month = ? AND version = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{int64(1), "2026-11", int64(1)}}
	stmtMaxTaskKey = &stmt{sql: "SELECT COALESCE(MAX(id), 0) FROM tasks",
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey"}
	// The open tasks that could still change a month ending at ?: seen
	// (registration or heartbeat, the server's clock) within --open-ttl
	// before its end, started before it, not seen past it
	// (PostgreSQL: tasks_open_seen_at, seen_at of the open tasks; SQLite
	// takes tasks_open_token, the same range of seen_at per token, a skip
	// scan over the few token names).
	stmtRecordOpen = &stmt{sql: `INSERT INTO statement_open (month, task_key, last_seen)
		SELECT ?, id, last_seen FROM tasks WHERE end_time IS NULL AND seen_at >= ? AND start_time < ? AND COALESCE(last_seen, start_time) < ?`,
		postgresIndex: "tasks_open_seen_at", postgresOnly: true,
		example: []any{"2026-11", int64(1705395200), int64(1706000000), int64(1706000000)}}
	// The same tasks read in a close's snapshot (SQLite: the close writes
	// them afterwards, see CloseMonth).
	stmtOpenToWatch = &stmt{sql: `SELECT id, last_seen FROM tasks
		WHERE end_time IS NULL AND seen_at >= ? AND start_time < ? AND COALESCE(last_seen, start_time) < ?`,
		sqliteIndex: "tasks_open_token", sqliteOnly: true, example: []any{int64(1705395200), int64(1706000000), int64(1706000000)}}
	stmtForgetOpen = &stmt{sql: "DELETE FROM statement_open WHERE month = ?",
		sqliteIndex: "sqlite_autoindex_statement_open_1", postgresIndex: "statement_open_pkey", example: []any{"2026-11"}}
	stmtSettleOpen = &stmt{sql: "DELETE FROM statement_open WHERE month = ? AND task_key = ?",
		sqliteIndex: "sqlite_autoindex_statement_open_1", postgresIndex: "statement_open_pkey", example: []any{"2026-11", int64(1)}}
	stmtKeepOpen = &stmt{sql: `INSERT INTO statement_open (month, task_key, last_seen) VALUES (?, ?, ?)
		ON CONFLICT (month, task_key) DO UPDATE SET last_seen = excluded.last_seen`,
		sqliteIndex: "", postgresIndex: "statement_open_pkey", example: []any{"2026-11", int64(1), int64(1)}}
	// Late data: registrations (the lag index, then the cut and the start
	// filtered in it) and changed open tasks (statement_open's key, then
	// tasks by id).
	stmtLateRegistered = &stmt{sql: `SELECT ` + lateColumns + `, 0, NULL FROM tasks t
		WHERE (t.registered_at - t.start_time) > ? AND t.id > ? AND t.start_time < ?`,
		sqliteIndex: "tasks_registration_lag", postgresIndex: "tasks_registration_lag", example: []any{int64(3600), int64(1), int64(1700000000)}}
	stmtLateChanged = &stmt{sql: `SELECT ` + lateColumns + `, 1, b.last_seen FROM statement_open b JOIN tasks t ON t.id = b.task_key
		WHERE b.month = ? AND (t.end_time IS NOT NULL OR COALESCE(t.last_seen, -1) <> COALESCE(b.last_seen, -1))`,
		sqliteIndex: "sqlite_autoindex_statement_open_1", postgresIndex: "statement_open_pkey", example: []any{"2026-11"}}
	stmtLateGPUs = &stmt{sql: `SELECT model, share, CASE WHEN gpu_instance_id IS NULL THEN 0 ELSE 1 END, mig_profile
		FROM task_gpus WHERE task_key = ? ORDER BY position`,
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey", example: []any{int64(1)}}
)

const lateColumns = `t.id, t.task_id, t.project, t.owner, t.start_time, t.end_time, t.last_seen, t.gpu_unlisted,
	CASE WHEN t.end_time IS NOT NULL AND (t.exit_code <> 0 OR t.gate_passed = 0) THEN 1 ELSE 0 END`

// booksStatements are the statements of closing, late data and
// retention, by name (the plan tests' subtests). The retention table's
// two statements are not among them: it holds one row.
var booksStatements = map[string]*stmt{
	"statement in force": stmtStatementInForce,
	"last version":       stmtLastVersion,
	"insert statement":   stmtInsertStatement,
	"reopen":             stmtReopen,
	"advance cut":        stmtAdvanceCut,
	"max task key":       stmtMaxTaskKey,
	"record open tasks":  stmtRecordOpen,
	"forget open tasks":  stmtForgetOpen,
	"settle open task":   stmtSettleOpen,
	"keep open task":     stmtKeepOpen,
	"late registrations": stmtLateRegistered,
	"late changes":       stmtLateChanged,
	"late task's GPUs":   stmtLateGPUs,
	"trim batch":         stmtTrimBatch,
	"trim GPUs":          stmtTrimGPUs,
	"trim task":          stmtTrimTask,
	"trim open batch":    stmtTrimOpenBatch,
	"trim check":         stmtTrimCheck,
	"oldest start":       stmtOldestStart,
}

// ErrNotClosed is returned by ReopenMonth for a month without a statement
// in force.
var ErrNotClosed = errors.New("store: the month is not closed")

// Closed is one version of a month's statement.
type Closed struct {
	Month      string
	Version    int
	ClosedAt   time.Time
	ClosedBy   string
	ReopenedAt *time.Time
	ReopenedBy string
	// TaskCut is the largest task key the month's late data has been
	// counted up to.
	TaskCut int64
	// SHA256 is the hash (hex) of the statement's canonical JSON, which
	// StatementBody reads.
	SHA256 string
}

func scanClosed(sc interface{ Scan(...any) error }) (*Closed, error) {
	var c Closed
	var closed int64
	var reopened sql.NullInt64
	if err := sc.Scan(&c.Month, &c.Version, &closed, &c.ClosedBy, &reopened, &c.ReopenedBy, &c.TaskCut, &c.SHA256); err != nil {
		return nil, err
	}
	c.ClosedAt = time.Unix(closed, 0).UTC()
	if reopened.Valid {
		t := time.Unix(reopened.Int64, 0).UTC()
		c.ReopenedAt = &t
	}
	return &c, nil
}

// Statement returns the month's statement in force, or nil when the month
// is open.
func (s *Store) Statement(ctx context.Context, month string) (*Closed, error) {
	c, err := scanClosed(s.queryRow(ctx, s.r, stmtStatementInForce, month))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: statement %s: %w", month, err)
	}
	return c, nil
}

// Statements lists every version of every statement, by month and version
// (reopened ones too).
func (s *Store) Statements(ctx context.Context) ([]Closed, error) {
	rows, err := s.query(ctx, s.r, stmtStatementVersions)
	if err != nil {
		return nil, fmt.Errorf("store: statements: %w", err)
	}
	defer rows.Close()
	var out []Closed
	for rows.Next() {
		c, err := scanClosed(rows)
		if err != nil {
			return nil, fmt.Errorf("store: statements: %w", err)
		}
		out = append(out, *c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: statements: %w", err)
	}
	return out, nil
}

// StatementBody returns a statement's canonical JSON.
func (s *Store) StatementBody(ctx context.Context, month string, version int) ([]byte, error) {
	return s.statementText(ctx, stmtStatementBody, month, version)
}

// StatementReport returns one of a statement's reports as served: by
// project, or (owner true) by project and owner.
func (s *Store) StatementReport(ctx context.Context, month string, version int, owner bool) ([]byte, error) {
	st := stmtStatementByProject
	if owner {
		st = stmtStatementByProjectOwner
	}
	return s.statementText(ctx, st, month, version)
}

func (s *Store) statementText(ctx context.Context, st *stmt, month string, version int) ([]byte, error) {
	var text string
	if err := s.queryRow(ctx, s.r, st, month, version).Scan(&text); err != nil {
		return nil, fmt.Errorf("store: statement %s version %d: %w", month, version, err)
	}
	return []byte(text), nil
}

// LateTask is a task whose part of a closed month changed after the close:
// as it is now, and as the month last counted it (Before false: not at
// all, a late registration).
type LateTask struct {
	Key                 int64
	TaskID              string
	Project, Owner      string
	Start               int64
	End, LastSeen       *int64 // now
	Before              bool
	BeforeLastSeen      *int64 // the last_seen counted then (the task was open)
	GPUUnlisted         int64
	Failed              bool
	GPUs                []LateGPU
	RegisteredLate      bool
	CompletedAfterClose bool
}

// LateGPU is a listed GPU of a late task, as the report prices it.
type LateGPU struct {
	Model, Profile string
	Share          float64
	MIG            bool
}

// CloseRequest says what CloseMonth closes and whose late data the new
// statement takes in.
type CloseRequest struct {
	Month  string
	Window report.Window
	By     string
	// Earlier are the closed months (with their statements in force)
	// whose late data goes into this statement: the closed months just
	// before it.
	Earlier []Closed
}

// Built is a statement as Build computes it: its canonical JSON, and its
// two reports as served.
type Built struct {
	Body, ByProject, ByProjectOwner []byte
}

// Build computes a statement under the close's lock: src reads the store
// as the lock holds it, late has each earlier month's late tasks, closedAt
// is the close's time and version its number.
type Build func(ctx context.Context, src report.Source, late map[string][]LateTask, closedAt time.Time, version int) (Built, error)

// CloseMonth stores a new version of the month's statement, built by build
// from one state of the store, unless one is in force: then it returns
// that one and created false (closing is idempotent). hash is the body's
// SHA-256 (hex), computed by the caller's hash function.
//
// PostgreSQL: one transaction that first takes LOCK TABLE tasks, task_gpus
// IN SHARE MODE (it waits for the writes in flight and holds new ones
// until the commit), reads and writes. SQLite: the reads in one read
// transaction of a connection of their own (a WAL snapshot: writers go on
// beside it), then the writes in a short write transaction; what is
// stored meanwhile is after the cut, or changes a watched task, and so is
// late data of the month like anything stored after the close.
func (s *Store) CloseMonth(ctx context.Context, req CloseRequest, build Build, hash func([]byte) string) (c *Closed, created bool, err error) {
	if c, err := s.Statement(ctx, req.Month); err != nil || c != nil {
		return c, false, err
	}
	if s.dialect == Postgres {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "LOCK TABLE tasks, task_gpus IN SHARE MODE"); err != nil {
			return nil, false, fmt.Errorf("store: close %s: lock: %w", req.Month, err)
		}
		// The reports read through the pool: nothing commits to the tasks
		// while the lock is held, so they see what the cut saw.
		st, c, err := s.gather(ctx, tx, s, req, build)
		if err != nil || c != nil {
			return c, false, err
		}
		if c, err = s.record(ctx, tx, req, st, hash); err != nil {
			return nil, false, err
		}
		if err := tx.Commit(); err != nil {
			return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
		}
		return c, true, nil
	}

	snap, err := sql.Open("sqlite", s.sqliteDSN)
	if err != nil {
		return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	defer snap.Close()
	// One connection, in one read transaction for every read below (the
	// reports' included): a plain BEGIN is deferred, the snapshot is
	// taken by the first read.
	snap.SetMaxOpenConns(1)
	snap.SetMaxIdleConns(1)
	if _, err := snap.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	view := *s
	view.r = snap
	st, c, err := view.gather(ctx, snap, &view, req, build)
	if err != nil || c != nil {
		return c, false, err
	}
	if st.watch, err = view.toWatch(ctx, req); err != nil {
		return nil, false, err
	}
	if _, err := snap.ExecContext(ctx, "COMMIT"); err != nil {
		return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	defer tx.Rollback()
	// Another process may have closed it meanwhile.
	if c, err := scanClosed(s.queryRow(ctx, tx, stmtStatementInForce, req.Month)); err == nil {
		return c, false, nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	if c, err = s.record(ctx, tx, req, st, hash); err != nil {
		return nil, false, err
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	return c, true, nil
}

// closeState is what a close read, for record to write.
type closeState struct {
	cut      int64
	version  int
	late     map[string][]LateTask
	closedAt time.Time
	built    Built
	// watch are the open tasks to watch (SQLite: read in the snapshot);
	// nil on PostgreSQL, which copies them in one statement.
	watch []LateTask
}

// gather reads what a close needs through q and builds the statement from
// src; it returns the statement in force instead when there is one.
func (s *Store) gather(ctx context.Context, q querier, src report.Source, req CloseRequest, build Build) (*closeState, *Closed, error) {
	if c, err := scanClosed(s.queryRow(ctx, q, stmtStatementInForce, req.Month)); err == nil {
		return nil, c, nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	st := &closeState{late: map[string][]LateTask{}}
	if err := s.queryRow(ctx, q, stmtMaxTaskKey).Scan(&st.cut); err != nil {
		return nil, nil, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	var last int
	if err := s.queryRow(ctx, q, stmtLastVersion, req.Month).Scan(&last); err != nil {
		return nil, nil, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	st.version = last + 1
	for _, e := range req.Earlier {
		w, err := report.ParseMonth("month", e.Month)
		if err != nil {
			return nil, nil, err
		}
		if st.late[e.Month], err = s.lateTasks(ctx, q, e, w); err != nil {
			return nil, nil, err
		}
	}
	st.closedAt = s.now().UTC().Truncate(time.Second)
	var err error
	if st.built, err = build(ctx, src, st.late, st.closedAt, st.version); err != nil {
		return nil, nil, err
	}
	return st, nil, nil
}

// toWatch reads the open tasks a close of req's month watches (SQLite).
func (s *Store) toWatch(ctx context.Context, req CloseRequest) ([]LateTask, error) {
	end := req.Window.To.Unix()
	rows, err := s.query(ctx, s.r, stmtOpenToWatch, end-int64(s.openTTL/time.Second), end, end)
	if err != nil {
		return nil, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	defer rows.Close()
	watch := []LateTask{}
	for rows.Next() {
		var t LateTask
		var seen sql.NullInt64
		if err := rows.Scan(&t.Key, &seen); err != nil {
			return nil, fmt.Errorf("store: close %s: %w", req.Month, err)
		}
		if seen.Valid {
			t.LastSeen = &seen.Int64
		}
		watch = append(watch, t)
	}
	return watch, rows.Err()
}

// record writes a close: the statement, the tasks it watches, and the
// earlier months' new baseline.
func (s *Store) record(ctx context.Context, tx *sql.Tx, req CloseRequest, st *closeState, hash func([]byte) string) (*Closed, error) {
	b := st.built
	c := &Closed{Month: req.Month, Version: st.version, ClosedAt: st.closedAt, ClosedBy: req.By, TaskCut: st.cut, SHA256: hash(b.Body)}
	if _, err := s.exec(ctx, tx, stmtInsertStatement, c.Month, c.Version, st.closedAt.Unix(), c.ClosedBy, st.cut, string(b.Body), c.SHA256,
		string(b.ByProject), string(b.ByProjectOwner)); err != nil {
		return nil, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	if _, err := s.exec(ctx, tx, stmtForgetOpen, req.Month); err != nil {
		return nil, fmt.Errorf("store: close %s: %w", req.Month, err)
	}
	if st.watch == nil {
		end := req.Window.To.Unix()
		if _, err := s.exec(ctx, tx, stmtRecordOpen, req.Month, end-int64(s.openTTL/time.Second), end, end); err != nil {
			return nil, fmt.Errorf("store: close %s: %w", req.Month, err)
		}
	}
	for _, t := range st.watch {
		if _, err := s.exec(ctx, tx, stmtKeepOpen, req.Month, t.Key, nullInt(t.LastSeen)); err != nil {
			return nil, fmt.Errorf("store: close %s: %w", req.Month, err)
		}
	}
	// The earlier months' late data is in this statement now: their
	// baseline moves to this close.
	for _, e := range req.Earlier {
		if err := s.settle(ctx, tx, e, st.late[e.Month], st.cut); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// settle records that month e's late tasks are counted: those still open
// and not seen past its end stay watched with their last_seen now; the
// others are settled; the cut moves to cut.
func (s *Store) settle(ctx context.Context, tx *sql.Tx, e Closed, late []LateTask, cut int64) error {
	w, err := report.ParseMonth("month", e.Month)
	if err != nil {
		return err
	}
	for _, t := range late {
		open := t.End == nil && (t.LastSeen == nil || *t.LastSeen < w.To.Unix())
		if open {
			if _, err := s.exec(ctx, tx, stmtKeepOpen, e.Month, t.Key, nullInt(t.LastSeen)); err != nil {
				return fmt.Errorf("store: settling %s: %w", e.Month, err)
			}
		} else if _, err := s.exec(ctx, tx, stmtSettleOpen, e.Month, t.Key); err != nil {
			return fmt.Errorf("store: settling %s: %w", e.Month, err)
		}
	}
	if _, err := s.exec(ctx, tx, stmtAdvanceCut, cut, e.Month, e.Version); err != nil {
		return fmt.Errorf("store: settling %s: %w", e.Month, err)
	}
	return nil
}

func nullInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// lateSlack covers requests received before a close but stored after its
// cut was read (registered_at is the receipt's time).
const lateSlack = 600

// LateTasks returns the closed month's late tasks (c its statement in
// force): what changed it since its statement, or since its late data last
// went into a later statement.
func (s *Store) LateTasks(ctx context.Context, c Closed) ([]LateTask, error) {
	w, err := report.ParseMonth("month", c.Month)
	if err != nil {
		return nil, err
	}
	return s.lateTasks(ctx, s.r, c, w)
}

func (s *Store) lateTasks(ctx context.Context, q querier, c Closed, w report.Window) ([]LateTask, error) {
	lag := c.ClosedAt.Unix() - w.To.Unix() - lateSlack
	if lag < 0 {
		lag = 0
	}
	var out []LateTask
	read := func(st *stmt, args ...any) error {
		rows, err := s.query(ctx, q, st, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t LateTask
			var end, seen, beforeSeen sql.NullInt64
			var failed, before int
			if err := rows.Scan(&t.Key, &t.TaskID, &t.Project, &t.Owner, &t.Start, &end, &seen, &t.GPUUnlisted, &failed,
				&before, &beforeSeen); err != nil {
				return err
			}
			if end.Valid {
				t.End = &end.Int64
			}
			if seen.Valid {
				t.LastSeen = &seen.Int64
			}
			if beforeSeen.Valid {
				t.BeforeLastSeen = &beforeSeen.Int64
			}
			t.Failed, t.Before = failed == 1, before == 1
			t.RegisteredLate = !t.Before
			t.CompletedAfterClose = t.Before && t.End != nil
			out = append(out, t)
		}
		return rows.Err()
	}
	if err := read(stmtLateRegistered, lag, c.TaskCut, w.To.Unix()); err != nil {
		return nil, fmt.Errorf("store: late data of %s: %w", c.Month, err)
	}
	if err := read(stmtLateChanged, c.Month); err != nil {
		return nil, fmt.Errorf("store: late data of %s: %w", c.Month, err)
	}
	for i := range out {
		rows, err := s.query(ctx, q, stmtLateGPUs, out[i].Key)
		if err != nil {
			return nil, fmt.Errorf("store: late data of %s: %w", c.Month, err)
		}
		for rows.Next() {
			var g LateGPU
			var mig int
			if err := rows.Scan(&g.Model, &g.Share, &mig, &g.Profile); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: late data of %s: %w", c.Month, err)
			}
			g.MIG = mig == 1
			out[i].GPUs = append(out[i].GPUs, g)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("store: late data of %s: %w", c.Month, err)
		}
	}
	return out, nil
}

// ReopenMonth marks the month's statement in force as reopened (by whom,
// now); it is kept, and the next close makes a new version.
func (s *Store) ReopenMonth(ctx context.Context, month, by string) (*Closed, error) {
	c, err := s.Statement(ctx, month)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotClosed, month)
	}
	now := s.now().UTC().Truncate(time.Second)
	if _, err := s.exec(ctx, s.w, stmtReopen, now.Unix(), by, month, c.Version); err != nil {
		return nil, fmt.Errorf("store: reopen %s: %w", month, err)
	}
	c.ReopenedAt, c.ReopenedBy = &now, by
	return c, nil
}
