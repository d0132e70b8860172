package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// stmt is one statement of the store, in the registry (statements,
// registry.go). The statements of the write path (a registration, a
// completion, a heartbeat) are listed in writeStatements, and
// TestWritePlans explains each on both stores, on tables with statistics,
// and checks that it reads tasks and task_gpus only through the index
// named here — so a write costs the same whatever the number of stored
// tasks; TestStatementPlans does the same for every registered statement.
type stmt struct {
	sql string
	// postgresSQL is the text on PostgreSQL where it differs from sql (a
	// statement written once with Dialect's fragments: perEngine).
	postgresSQL string
	// postgresBound is the text on PostgreSQL with its placeholders
	// bound ($1, $2, …), set when it is registered (a template's is
	// built at each run).
	postgresBound string
	// sqliteIndex and postgresIndex name the index each store must serve
	// the statement with; "" where the statement reads no table (an
	// INSERT without a conflict target, the advisory lock). For an INSERT
	// … ON CONFLICT on PostgreSQL it is the conflict's arbiter index.
	sqliteIndex, postgresIndex string
	// example is a set of arguments of the right types, for EXPLAIN.
	example []any
	// postgresOnly, sqliteOnly: the other store never runs it.
	postgresOnly, sqliteOnly bool
	// name is the statement's name in the registry (statements), set when
	// it is registered; Store.exec and the other runners refuse a
	// statement without one.
	name string
	// fullScan, for a statement that reads a whole table on purpose, says
	// why (a backup counting every task); the plan test explains it but
	// checks no index.
	fullScan string
	// postgresFullScan is fullScan on PostgreSQL only: the statement reads
	// a table whole there and by its index on SQLite.
	postgresFullScan string
	// noPlan, for a statement that has no plan to check (DDL, transaction
	// control, maintenance: VACUUM, a migration's bookkeeping), says why;
	// the plan test does not explain it.
	noPlan string
	// build, for a statement whose text is assembled from fragments at run
	// time (the report's grouping columns, billing's hour part), builds a
	// representative instance on d: the plan test checks that one. The
	// store runs such a statement through Store.queryBuilt with the text it
	// built for the call.
	build func(d Dialect) string
	// readSession: the statement runs in the report's read session
	// (Dialect.readSettings), and its plan is checked there.
	readSession bool
}

// SQL of the write path, ? placeholders (bind numbers them for PostgreSQL).
// A task is found by its task_id through tasks_identity (task_id, project,
// owner): one task_id may name tasks of several scopes, and which of them
// the sender sees is decided in Go. Once found, a task is its key, tasks.id
// (SQLite: the rowid, INTEGER PRIMARY KEY), and its GPUs are (task_key,
// position).
var (
	// The batcher's savepoints (SQLite only: batch.go).
	stmtSavepoint        = &stmt{sql: "SAVEPOINT reg", sqliteOnly: true}
	stmtRollbackTo       = &stmt{sql: "ROLLBACK TO reg", sqliteOnly: true}
	stmtReleaseSavepoint = &stmt{sql: "RELEASE reg", sqliteOnly: true}

	// lockTask: PostgreSQL only (see Store.lockTask).
	stmtLockTask = &stmt{sql: "SELECT pg_advisory_xact_lock(hashtext(?))", example: []any{"t"}, postgresOnly: true}

	// sameID: the tasks stored under a task_id, for the sender's scope to
	// pick from (write.go, visible).
	stmtSameID = &stmt{sql: `SELECT id, project, owner, start_time, registration, completion
		FROM tasks WHERE task_id = ? ORDER BY start_time, id`,
		sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity", example: []any{"t"}}
	// The bound on a sender's open tasks (checkOpenBound): counting stops
	// at the bound.
	stmtOpenOfToken = &stmt{sql: `SELECT COUNT(*) FROM (SELECT 1 FROM tasks
		WHERE token = ? AND end_time IS NULL AND seen_at >= ? LIMIT ?) o`,
		sqliteIndex: "tasks_open_token", postgresIndex: "tasks_open_token", example: []any{"tok", int64(1), int64(10)}}
	stmtPendingOfToken = &stmt{sql: `SELECT COUNT(*) FROM (SELECT 1 FROM pending_completions WHERE token = ? LIMIT ?) p`,
		sqliteIndex: "pending_completions_token", postgresIndex: "pending_completions_token", example: []any{"tok", int64(10)}}

	stmtInsertTask = &stmt{sql: `INSERT INTO tasks (task_id, task_name, project, owner, priority, env,
		pipeline, pipeline_run, step, orchestrator, k8s_namespace, k8s_pod, k8s_node, k8s_pod_uid, k8s_job_index, slurm_job,
		hostname, start_time, gpu_count, gpu_unlisted, duration_est, labels, registration, registered_at, submit_time, token, seen_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (task_id, project, owner) DO NOTHING RETURNING id`,
		// SQLite's plan of the upsert looks up task_gpus' foreign key to
		// the new row by task_gpus' primary key.
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "tasks_identity",
		example: []any{"t", "n", "p", "o", "", "", "", "", "", "", "", "", "", "", nil, "", "h", int64(1), int64(2), int64(0), nil,
			"{}", "{}", int64(1), nil, "", int64(1)}}
	stmtInsertProjectOwner = &stmt{sql: "INSERT INTO project_owners (project, owner) VALUES (?, ?) ON CONFLICT (project, owner) DO NOTHING",
		postgresIndex: "project_owners_pkey", example: []any{"p", "o"}}
	stmtInsertGPU = &stmt{sql: `INSERT INTO task_gpus (task_key, position, gpu_index, uuid, model, memory_total, task_start,
		share, exclusive, mig_uuid, gpu_instance_id, compute_instance_id, mig_profile, mig_slices, mig_total_slices)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		example: []any{int64(1), int64(0), int64(0), "GPU-1", "m", int64(1), int64(1), 0.5, int64(0), "MIG-1", int64(1), int64(0),
			"1g.18gb", int64(1), int64(7)}}
	// endOlderClaims ends the claims of open tasks that started before the
	// new one on this UUID, for a sender that sees every task (an admin,
	// or no tokens file). "uuid <> ''", "claim_ended IS NULL" and
	// "task_end IS NULL" are written out so that SQLite may use the
	// partial index: it does only when the query's WHERE implies the
	// index's.
	// Only the claims that collide with the new one end (claimCollides).
	stmtEndOlderClaims = &stmt{sql: `UPDATE task_gpus SET claim_ended = ?
		WHERE uuid = ? AND uuid <> '' AND claim_ended IS NULL AND task_end IS NULL
		AND task_start < ? AND task_key <> ? AND ` + claimCollides,
		sqliteIndex: "task_gpus_open_claims", postgresIndex: "task_gpus_open_claims",
		example: []any{int64(1), "GPU-1", int64(1), int64(1), int64(-1), int64(1), int64(-1), int64(-1), int64(1)}}
	// olderClaims: the same claims, listed, for a scoped sender to decide
	// on each (claimTask).
	stmtOlderClaims = &stmt{sql: `SELECT task_key, position FROM task_gpus
		WHERE uuid = ? AND uuid <> '' AND claim_ended IS NULL AND task_end IS NULL
		AND task_start < ? AND task_key <> ? AND ` + claimCollides,
		sqliteIndex: "task_gpus_open_claims", postgresIndex: "task_gpus_open_claims",
		example: []any{"GPU-1", int64(1), int64(1), int64(3), int64(0), int64(3), int64(3), int64(0)}}
	// claimTask: whose claim it is, and whether it is live.
	stmtClaimTask = &stmt{sql: "SELECT project, owner, seen_at, end_time IS NOT NULL FROM tasks WHERE id = ?",
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(1)}}
	// laterClaim: the first start after the new task's on this UUID (a
	// sender that sees every task).
	stmtLaterClaim = &stmt{sql: `SELECT MIN(task_start) FROM task_gpus
		WHERE uuid = ? AND uuid <> '' AND task_start > ? AND task_key <> ? AND ` + claimCollides,
		sqliteIndex: "task_gpus_uuid_start", postgresIndex: "task_gpus_uuid_start",
		example: []any{"GPU-1", int64(1), int64(1), int64(3), int64(0), int64(3), int64(3), int64(0)}}
	// laterClaims: those starts in order, for a scoped sender.
	stmtLaterClaims = &stmt{sql: `SELECT task_key, task_start FROM task_gpus
		WHERE uuid = ? AND uuid <> '' AND task_start > ? AND task_key <> ? AND ` + claimCollides + ` ORDER BY task_start`,
		sqliteIndex: "task_gpus_uuid_start", postgresIndex: "task_gpus_uuid_start",
		example: []any{"GPU-1", int64(1), int64(1), int64(-1), int64(1), int64(-1), int64(-1), int64(1)}}
	stmtEndClaim = &stmt{sql: "UPDATE task_gpus SET claim_ended = ? WHERE task_key = ? AND position = ?",
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey",
		example: []any{int64(1), int64(1), int64(0)}}
	stmtPendingCompletions = &stmt{sql: `SELECT completion, scope, received_at FROM pending_completions
		WHERE task_id = ? ORDER BY received_at, scope`,
		sqliteIndex: "sqlite_autoindex_pending_completions_1", postgresIndex: "pending_completions_pkey",
		example: []any{"t"}}
	stmtDeletePending = &stmt{sql: "DELETE FROM pending_completions WHERE task_id = ? AND scope = ?",
		sqliteIndex: "sqlite_autoindex_pending_completions_1", postgresIndex: "pending_completions_pkey",
		example: []any{"t", ""}}

	stmtInsertPending = &stmt{sql: `INSERT INTO pending_completions (task_id, completion, scope, received_at, token)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id, scope) DO NOTHING`,
		postgresIndex: "pending_completions_pkey", example: []any{"t", "{}", "", int64(1), ""}}
	stmtStoredPending = &stmt{sql: "SELECT completion FROM pending_completions WHERE task_id = ? AND scope = ?",
		sqliteIndex: "sqlite_autoindex_pending_completions_1", postgresIndex: "pending_completions_pkey",
		example: []any{"t", ""}}
	stmtCompleteTask = &stmt{sql: `UPDATE tasks SET end_time = ?, duration_seconds = ?, exit_code = ?, signal = ?,
		gate_passed = ?, gate_expr = ?, gate_reason = ?, metrics = ?, completion = ?, completed_at = ?
		WHERE id = ?`,
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey",
		example: []any{int64(1), 1.5, int64(0), "", nil, "", "", nil, "{}", int64(1), int64(1)}}
	// completeGPUs copies the task's end onto its GPUs (their claims are
	// then no longer open: task_gpus_open_claims).
	stmtCompleteGPUs = &stmt{sql: "UPDATE task_gpus SET task_end = ? WHERE task_key = ?",
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey",
		example: []any{int64(1), int64(1)}}
	// GPU summaries: matched by the MIG instance's UUID (two instances of
	// one parent share the parent's), by UUID, or by position for a GPU
	// without one.
	stmtGPUSummaryByMIG = &stmt{sql: `UPDATE task_gpus SET samples = ?, util_mean = ?, util_p95 = ?,
		memory_used_peak_bytes = ?, idle_share = ?, energy_joules = ?, energy_estimated = ? WHERE task_key = ? AND mig_uuid = ?`,
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey",
		example: []any{int64(1), 1.5, 1.5, int64(1), 0.5, 1.5, int64(1), int64(1), "MIG-1"}}
	stmtGPUSummaryByUUID = &stmt{sql: `UPDATE task_gpus SET samples = ?, util_mean = ?, util_p95 = ?,
		memory_used_peak_bytes = ?, idle_share = ?, energy_joules = ?, energy_estimated = ? WHERE task_key = ? AND uuid = ?`,
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey",
		example: []any{int64(1), 1.5, 1.5, int64(1), 0.5, 1.5, int64(1), int64(1), "GPU-1"}}
	stmtGPUSummaryByPosition = &stmt{sql: `UPDATE task_gpus SET samples = ?, util_mean = ?, util_p95 = ?,
		memory_used_peak_bytes = ?, idle_share = ?, energy_joules = ?, energy_estimated = ? WHERE task_key = ? AND position = ? AND uuid = ''`,
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey",
		example: []any{int64(1), 1.5, 1.5, int64(1), 0.5, 1.5, int64(1), int64(1), int64(0)}}

	// heartbeat: last_seen forward only; seen_at is the server's receipt.
	stmtHeartbeat = &stmt{sql: `UPDATE tasks SET
		last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END,
		seen_at = CASE WHEN seen_at < ? THEN ? ELSE seen_at END
		WHERE id = ? AND end_time IS NULL`,
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey",
		example: []any{int64(1), int64(1), int64(1), int64(1), int64(1)}}

	// heartbeatTaskID: a heartbeat of a sender that sees every task (nil
	// scope) is this one statement, every open task under the task_id at
	// once (docs/monitor.md, Teams sharing one monitor: a heartbeat
	// updates each); on
	// PostgreSQL the heartbeats waiting together are these statements in
	// one pipeline (hbBatcher, batch.go). "end_time IS NULL" is written
	// inside a CASE so that no planner may take it for the predicate of
	// a partial index of open tasks: on a table without fresh statistics
	// (a monitor's first minutes) PostgreSQL otherwise reads every open
	// task through tasks_open_token; only tasks_identity can serve it.
	stmtHeartbeatTaskID = &stmt{sql: `UPDATE tasks SET
		last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END,
		seen_at = CASE WHEN seen_at < ? THEN ? ELSE seen_at END
		WHERE task_id = ? AND CASE WHEN end_time IS NULL THEN 1 END = 1`,
		sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity",
		example: []any{int64(1), int64(1), int64(1), int64(1), "t"}}
	// heartbeatDone: a heartbeat of a completed task (none under its
	// task_id is open) moves that task's last_seen forward, never its GPU
	// data or seen_at: its counted end is max(end_time, last_seen).
	stmtHeartbeatDone = &stmt{sql: `UPDATE tasks SET
		last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END
		WHERE id = ? AND end_time IS NOT NULL`,
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey",
		example: []any{int64(1), int64(1), int64(1)}}
	// heartbeatDoneTaskID: after a heartbeat of a sender that sees every
	// task updated no open task, the newest task under the task_id (a
	// completed one: 200) takes it as heartbeatDone does; none updated:
	// no such task, 404.
	stmtHeartbeatDoneTaskID = &stmt{sql: `UPDATE tasks SET
		last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END
		WHERE id = (SELECT n.id FROM tasks n WHERE n.task_id = ? ORDER BY n.start_time DESC, n.id DESC LIMIT 1)
		AND end_time IS NOT NULL`,
		sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity",
		example: []any{int64(1), int64(1), "t"}}

	// A heartbeat with GPU samples (idle.go).
	stmtSampledTask = &stmt{sql: "SELECT end_time, gpus_seen, idle_since, observed_at FROM tasks WHERE id = ?",
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(1)}}
	stmtSampledGPUs = &stmt{sql: "SELECT position, uuid, mig_uuid FROM task_gpus WHERE task_key = ? AND uuid <> '' ORDER BY position",
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey", example: []any{int64(1)}}
	stmtLatestSample = &stmt{sql: "UPDATE task_gpus SET latest_samples = ?, latest_util_mean = ? WHERE task_key = ? AND position = ?",
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey",
		example: []any{int64(1), 1.5, int64(1), int64(0)}}
	stmtIdleState = &stmt{sql: "UPDATE tasks SET gpus_seen = ?, heartbeat_interval = ?, idle_since = ? WHERE id = ?",
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey",
		example: []any{int64(1), int64(60), int64(1), int64(1)}}
)

// text is st's SQL on d, placeholders bound (a template's representative
// instance).
func (st *stmt) text(d Dialect) string {
	if st.build != nil {
		q, _ := d.expand(st.build(d), nil)
		return d.bind(q)
	}
	if d != Postgres {
		return st.sql // SQLite's placeholders are the text's own
	}
	if st.postgresBound != "" {
		return st.postgresBound
	}
	if st.postgresSQL != "" {
		return d.bind(st.postgresSQL)
	}
	return d.bind(st.sql)
}

// perEngine gives st the texts of one writing of it, f, on each engine
// (f takes the dialect's fragments).
func perEngine(f func(d Dialect) string, st *stmt) *stmt {
	st.sql, st.postgresSQL = f(SQLite), f(Postgres)
	return st
}

// claimCollides is the rule of "one GPU instance runs one task" on another
// claim of the same UUID (a task_gpus row), for a new claim given by five
// arguments: its GPU instance id (-1 for a whole GPU), whether it holds
// its whole instance (1: exclusive; shared GPUs 0), the instance id twice
// more and exclusive again. The two claims collide (the older ends) when
//   - the new one is a whole GPU held exclusively: any claim on it;
//   - the new one is a shared whole GPU: an exclusive whole-GPU claim or any
//     MIG claim (the GPU was re-partitioned), never another shared one;
//   - the new one is a MIG instance: any whole-GPU claim on its parent, and
//     on its own instance any claim if it is exclusive, else exclusive
//     ones; other instances of the parent are left alone.
//
// The rule is symmetric, so it serves both directions (older claims that
// end, and a later claim that ends a late registration's own). It filters
// the rows of the index range (uuid, task_start), never choosing another.
const claimCollides = `((? < 0 AND (? = 1 OR gpu_instance_id IS NOT NULL OR exclusive = 1))
		OR (? >= 0 AND (gpu_instance_id IS NULL OR (gpu_instance_id = ? AND (? = 1 OR exclusive = 1)))))`

// writeStatements is every statement of the write path, by name (the plan
// tests' subtests).
var writeStatements = map[string]*stmt{
	"savepoint":                       stmtSavepoint,
	"savepoint: roll back":            stmtRollbackTo,
	"savepoint: release":              stmtReleaseSavepoint,
	"lock task":                       stmtLockTask,
	"same task id":                    stmtSameID,
	"open tasks of token":             stmtOpenOfToken,
	"pending of token":                stmtPendingOfToken,
	"insert task":                     stmtInsertTask,
	"insert project owner":            stmtInsertProjectOwner,
	"insert GPU":                      stmtInsertGPU,
	"end older claims":                stmtEndOlderClaims,
	"older claims":                    stmtOlderClaims,
	"claim's task":                    stmtClaimTask,
	"later claim":                     stmtLaterClaim,
	"later claims":                    stmtLaterClaims,
	"end claim":                       stmtEndClaim,
	"pending completions":             stmtPendingCompletions,
	"delete pending completion":       stmtDeletePending,
	"insert pending completion":       stmtInsertPending,
	"stored pending completion":       stmtStoredPending,
	"complete task":                   stmtCompleteTask,
	"complete GPUs":                   stmtCompleteGPUs,
	"GPU summary by MIG UUID":         stmtGPUSummaryByMIG,
	"GPU summary by UUID":             stmtGPUSummaryByUUID,
	"GPU summary by position":         stmtGPUSummaryByPosition,
	"heartbeat":                       stmtHeartbeat,
	"heartbeat by task id":            stmtHeartbeatTaskID,
	"heartbeat, completed":            stmtHeartbeatDone,
	"heartbeat by task id, completed": stmtHeartbeatDoneTaskID,
	"sampled heartbeat's task":        stmtSampledTask,
	"sampled heartbeat's GPUs":        stmtSampledGPUs,
	"latest GPU sample":               stmtLatestSample,
	"idle state":                      stmtIdleState,
}

// querier is what a write statement runs on: a transaction or a pool.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// exec runs a statement of the registry.
func (s *Store) exec(ctx context.Context, q querier, st *stmt, args ...any) (sql.Result, error) {
	registered(st)
	if ps := s.prepared(ctx, q, st); ps != nil {
		return ps.ExecContext(ctx, args...)
	}
	return q.ExecContext(ctx, st.text(s.dialect), args...)
}

// queryRow runs a read of the registry that returns one row.
func (s *Store) queryRow(ctx context.Context, q querier, st *stmt, args ...any) *sql.Row {
	registered(st)
	if ps := s.prepared(ctx, q, st); ps != nil {
		return ps.QueryRowContext(ctx, args...)
	}
	return q.QueryRowContext(ctx, st.text(s.dialect), args...)
}

// query runs a read of the registry that returns several rows.
func (s *Store) query(ctx context.Context, q querier, st *stmt, args ...any) (*sql.Rows, error) {
	registered(st)
	if ps := s.prepared(ctx, q, st); ps != nil {
		return ps.QueryContext(ctx, args...)
	}
	return q.QueryContext(ctx, st.text(s.dialect), args...)
}

// prepared returns st prepared on SQLite's writer connection, for the
// transaction q, or nil to run it unprepared. SQLite compiles a statement's
// text on every call otherwise (a third of a registration's CPU); the
// writer is one connection, so each statement is compiled once, at Open
// (prepareWrites). pgx keeps its own cache of prepared statements per
// connection.
func (s *Store) prepared(ctx context.Context, q querier, st *stmt) *sql.Stmt {
	tx, ok := q.(*sql.Tx)
	if !ok || s.prep == nil {
		return nil
	}
	ps := s.prep[st]
	if ps == nil {
		return nil
	}
	return tx.StmtContext(ctx, ps)
}

// prepareWrites prepares the write statements (the tasks' and the node
// reports') on SQLite's writer connection. It runs in Open, before any write: the writer is the one
// connection, which a transaction would hold.
func (s *Store) prepareWrites(ctx context.Context) error {
	prep := map[*stmt]*sql.Stmt{}
	for _, set := range []map[string]*stmt{writeStatements, nodeStatements} {
		for name, st := range set {
			if st.postgresOnly {
				continue
			}
			ps, err := s.w.PrepareContext(ctx, st.sql)
			if err != nil {
				for _, p := range prep {
					p.Close()
				}
				return fmt.Errorf("store: preparing %s: %w", name, err)
			}
			prep[st] = ps
		}
	}
	s.prep = prep
	return nil
}

// pipeline runs st once per set of arguments on one PostgreSQL
// connection, all in one round trip and one implicit transaction (one
// commit, after the last; none of them is kept when one fails), and
// returns the rows each changed. It returns after the commit.
func (s *Store) pipeline(ctx context.Context, st *stmt, args [][]any) ([]int64, error) {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	q := st.text(s.dialect)
	out := make([]int64, 0, len(args))
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("not a pgx connection: %T", dc)
		}
		var b pgx.Batch
		for _, a := range args {
			b.Queue(q, a...)
		}
		br := c.Conn().SendBatch(ctx, &b)
		for range args {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return err
			}
			out = append(out, tag.RowsAffected())
		}
		// Close reads up to the end of the implicit transaction: its
		// commit, or the commit's error.
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
