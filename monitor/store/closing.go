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
)

// Statement statements with the index each uses (plans checked by
// TestBooksPlans on both engines, like the write path's).
var (
	stmtStatementInForce = &stmt{sql: `SELECT month, version, closed_at, closed_by, reopened_at, reopened_by, task_cut, sha256
		FROM statements WHERE month = ? AND reopened_at IS NULL ORDER BY version DESC LIMIT 1`,
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"2026-11"}}
	stmtStatementVersions = &stmt{sql: `SELECT month, version, closed_at, closed_by, reopened_at, reopened_by, task_cut, sha256
		FROM statements ORDER BY month, version`, fullScan: "every version of every month: the list is the answer"}
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
	"statement in force":  stmtStatementInForce,
	"last version":        stmtLastVersion,
	"insert statement":    stmtInsertStatement,
	"reopen":              stmtReopen,
	"advance cut":         stmtAdvanceCut,
	"max task key":        stmtMaxTaskKey,
	"record open tasks":   stmtRecordOpen,
	"forget open tasks":   stmtForgetOpen,
	"settle open task":    stmtSettleOpen,
	"keep open task":      stmtKeepOpen,
	"late registrations":  stmtLateRegistered,
	"late changes":        stmtLateChanged,
	"late task's GPUs":    stmtLateGPUs,
	"trim batch":          stmtTrimBatch,
	"trim GPUs":           stmtTrimGPUs,
	"trim task":           stmtTrimTask,
	"trim open batch":     stmtTrimOpenBatch,
	"trim check":          stmtTrimCheck,
	"oldest start":        stmtOldestStart,
	"insert task facts":   stmtInsertTaskFacts,
	"task facts":          stmtTaskFacts,
	"insert ledger facts": stmtInsertLedgerFacts,
	"ledger facts":        stmtLedgerFacts,
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
	return stmtRows(ctx, s, s.r, "statements", stmtStatementVersions, func(rows *sql.Rows, out *Closed) error {
		c, err := scanClosed(rows)
		if err == nil {
			*out = *c
		}
		return err
	})
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

// ReopenMonth marks the month's statement in force as reopened (by whom,
// now); it is kept, and the next close makes a new version.
func (s *Store) ReopenMonth(ctx context.Context, month, by string) (*Closed, error) {
	return s.reopen(ctx, month, by, stmtReopen)
}

// reopen marks the month's statement in force as reopened by whom, now,
// with st, whose arguments are the time, by, then notes, the month and
// the version. A version st leaves untouched (reopened meanwhile, where
// st checks) is ErrNotClosed.
func (s *Store) reopen(ctx context.Context, month, by string, st *stmt, notes ...any) (*Closed, error) {
	c, err := s.Statement(ctx, month)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotClosed, month)
	}
	now := s.now().UTC().Truncate(time.Second)
	args := append(append([]any{now.Unix(), by}, notes...), month, c.Version)
	res, err := s.exec(ctx, s.w, st, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reopen %s: %w", month, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return nil, fmt.Errorf("%w: %s (reopened meanwhile)", ErrNotClosed, month)
	}
	c.ReopenedAt, c.ReopenedBy = &now, by
	return c, nil
}
