package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// CloseRequest says what CloseMonth closes and whose late data the new
// statement takes in.
type CloseRequest struct {
	Month  string
	Window facts.Window
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
	// Frozen are the month's task facts the reports were computed from
	// (TaskFacts and the observations, read by build through src): stored
	// with the statement, in its transaction (nil: none).
	Frozen *Frozen
	// Ledger are the month's ledger facts (package ledger, with the
	// close's inputs): stored with the statement, in its transaction, so
	// the closed month's ledger is grouped from them (nil: none, the
	// ledger stays live).
	Ledger *LedgerFacts
	// Exports are files kept with the statement from the same read
	// (the chargeback lines), stored in its transaction as
	// PutStatementExport keeps them, each with its SHA-256.
	Exports []Export
}

// Export is one file kept with a statement, under its format.
type Export struct {
	Format string
	Body   []byte
}

// Build computes a statement under the close's lock: src reads the store
// as the lock holds it, late has each earlier month's late tasks, closedAt
// is the close's time and version its number.
type Build func(ctx context.Context, src facts.Source, late map[string][]LateTask, closedAt time.Time, version int) (Built, error)

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
		if _, err := s.exec(ctx, tx, stmtLockTasks); err != nil {
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
	if _, err := s.exec(ctx, snap, stmtBegin); err != nil {
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
	if _, err := s.exec(ctx, snap, stmtCommit); err != nil {
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
func (s *Store) gather(ctx context.Context, q querier, src facts.Source, req CloseRequest, build Build) (*closeState, *Closed, error) {
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
		w, err := facts.ParseMonth("month", e.Month)
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
	watch, err := stmtRows(ctx, s, s.r, "close "+req.Month, stmtOpenToWatch, func(rows *sql.Rows, t *LateTask) error {
		var seen sql.NullInt64
		err := rows.Scan(&t.Key, &seen)
		if seen.Valid {
			t.LastSeen = &seen.Int64
		}
		return err
	}, end-int64(s.openTTL/time.Second), end, end)
	if err == nil && watch == nil {
		watch = []LateTask{}
	}
	return watch, err
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
	if b.Frozen != nil {
		if err := s.writeFrozen(ctx, tx, req.Month, st.version, b.Frozen, req.Window.From.Unix()); err != nil {
			return nil, err
		}
	}
	if b.Ledger != nil {
		if err := s.writeLedgerFacts(ctx, tx, req.Month, st.version, b.Ledger, req.Window.From.Unix()); err != nil {
			return nil, err
		}
	}
	for _, e := range b.Exports {
		if _, err := s.exec(ctx, tx, stmtPutExport, req.Month, st.version, e.Format, string(e.Body), hash(e.Body)); err != nil {
			return nil, fmt.Errorf("store: close %s: %s: %w", req.Month, e.Format, err)
		}
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
	w, err := facts.ParseMonth("month", e.Month)
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
