package store

import (
	"cmp"
	"context"
	"database/sql"
	"slices"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// The tasks' statements are plan-checked with the write path's, over a
// store of tasks (TestWritePlans), and prepared with them: the ties of a
// report's users run on every report.
func init() {
	writeStatements["attributed seen"] = stmtAttributedSeen
	writeStatements["observed idle"] = stmtObservedIdle
	writeStatements["report ties by pod"] = stmtReportTiesPod
	writeStatements["report ties by Slurm job"] = stmtReportTiesSlurm
	writeStatements["report ties by Slurm run"] = stmtReportTiesSlurmRun
	writeStatements["report ties by container"] = stmtReportTiesContainer
}

// The ties of a report's users (reportTies), one statement per rule for
// them all, the rule's keys as a JSON array: LedgerTies' statements, with
// the list first in the join, whatever the statistics say, so that a
// report costs a seek per key (SQLite: CROSS JOIN keeps the order;
// PostgreSQL: a lateral subquery, fenced).
var (
	stmtReportTiesPod = perEngine(func(d Dialect) string {
		return reportTieSQL(d, d.keyList("j"), "k8s_pod_uid", "t.k8s_pod_uid = j.value AND t.k8s_pod_uid <> ''")
	}, &stmt{sqliteIndex: "tasks_k8s_pod_uid", postgresIndex: "tasks_k8s_pod_uid", example: []any{`["pod"]`}})
	stmtReportTiesSlurm = perEngine(func(d Dialect) string {
		return reportTieSQL(d, d.keyList("j"), "slurm_job", "t.slurm_job = j.value AND t.slurm_job <> ''")
	}, &stmt{sqliteIndex: "tasks_slurm_job", postgresIndex: "tasks_slurm_job", example: []any{`["42"]`}})
	stmtReportTiesSlurmRun = perEngine(func(d Dialect) string {
		return reportTieSQL(d, d.keyList("j"), "pipeline_run", "t.pipeline_run = j.value AND t.orchestrator = 'slurm' AND t.pipeline_run <> ''")
	}, &stmt{sqliteIndex: "tasks_slurm_run", postgresIndex: "tasks_slurm_run", example: []any{`["42"]`}})
	// reportTiesContainer: keys [task_id, project].
	stmtReportTiesContainer = perEngine(func(d Dialect) string {
		return reportTieSQL(d, d.pairList("j"), "task_id", "t.task_id = j.k0 AND t.project = j.k1")
	}, &stmt{sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity", example: []any{`[["t", "p"]]`}})
)

// reportTieSQL reads the registrations matching the list's keys (match,
// over the list's columns and those of tasks), each with the key it
// matched (key: the column of tasks that holds it).
func reportTieSQL(d Dialect, list, key, match string) string {
	cols := `t.` + key + `, t.id, t.task_id, t.project, t.owner, t.start_time, t.hostname, t.k8s_node, t.k8s_pod_uid`
	if d == Postgres {
		return `SELECT r.* FROM ` + list + ` CROSS JOIN LATERAL (SELECT ` + cols + ` FROM tasks t WHERE ` + match + ` ` + d.fence() + `) r`
	}
	return `SELECT ` + cols + ` FROM ` + list + ` CROSS JOIN tasks t WHERE ` + match
}

// stmtAttributedSeen moves a task's last_seen to the last instant a node
// report attributed to it (MONITOR.md 20.3), completed or not: its counted
// end is max(end_time, last heartbeat, last attributed instant).
var stmtAttributedSeen = &stmt{sql: `UPDATE tasks SET
	last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END
	WHERE id = ? AND (end_time IS NOT NULL OR ? = 0)`,
	sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(2), int64(2), int64(1), int64(0)}}

// observedTasks applies report r, kept over [keptStart, keptEnd), to the
// tasks its users are tied to: each is seen to the kept span's end, never
// past now (the rest of a span from a fast clock is provisional, NODE.md
// 12.2), completed or not, from any report; and, from the node's newest
// report (newest), the open ones' idleness (docs/cost.md, "The ledger"): a
// task is idle when each of its tied users' busy_share was 0 (idle_since
// kept, or set to the report's start), busy otherwise, and it is marked as
// observed (its heartbeats no longer change idle_since).
func (s *Store) observedTasks(ctx context.Context, tx *sql.Tx, r *wire.NodeReport, newest bool, keptStart, keptEnd int64) error {
	if keptEnd <= keptStart && !newest {
		return nil
	}
	var ids []UserIdentity
	var busy []float64
	for _, in := range r.Instances {
		if in.Samples <= 0 {
			continue
		}
		for j := range in.Users {
			ids, busy = append(ids, identityOf(&in.Users[j])), append(busy, in.Users[j].BusyShare)
		}
	}
	ties, err := s.reportTies(ctx, tx, r.Node, ids)
	if err != nil {
		return err
	}
	idle := map[int64]bool{}
	var order []int64
	for i, cands := range ties {
		var tie *Tie
		for k := range cands {
			if cands[k].StartTime <= r.Time {
				tie = &cands[k]
			}
		}
		if tie == nil {
			continue
		}
		was, seen := idle[tie.Key]
		if !seen {
			order = append(order, tie.Key)
			was = true
		}
		idle[tie.Key] = was && busy[i] == 0
	}
	seen := min(keptEnd, s.now().Unix())
	for _, key := range order {
		if newest {
			flag := int64(0)
			if idle[key] {
				flag = 1
			}
			if _, err := s.exec(ctx, tx, stmtObservedIdle, flag, r.Time-r.IntervalSeconds, r.Time, seen, seen, key); err != nil {
				return err
			}
		}
		if keptEnd > keptStart {
			// The open tasks moved with their idleness above when newest.
			onlyDone := int64(0)
			if newest {
				onlyDone = 1
			}
			if _, err := s.exec(ctx, tx, stmtAttributedSeen, seen, seen, key, onlyDone); err != nil {
				return err
			}
		}
	}
	return nil
}

// reportTies returns what tieCandidates returns for each of a report's
// users (ids) of node, with one statement per tie rule for them all (as
// LedgerTies reads them), its rows filtered by the rest of the rule here: a report's users are mostly of
// one rule and few keys (a pod's containers share its UID).
func (s *Store) reportTies(ctx context.Context, tx *sql.Tx, node string, ids []UserIdentity) ([][]Tie, error) {
	read := func(st *stmt, keys any, into func(r tieRow)) error {
		rows, err := stmtRows(ctx, s, tx, "report ties", st, scanTieRow, keyListArg(keys))
		for _, r := range rows {
			into(r)
		}
		return err
	}
	// The keys of each rule, as tieCandidates chooses the rule.
	var pods, jobs []string
	var decls [][2]string
	for i := range ids {
		u := &ids[i]
		switch {
		case u.PodUID != "":
			pods = append(pods, u.PodUID)
		case u.SlurmJob != "":
			jobs = append(jobs, u.SlurmJob)
		case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
			decls = append(decls, [2]string{u.DeclaredTaskID, u.DeclaredProject})
		}
	}
	ix := tieIndex{byPod: map[string][]tieRow{}, byJob: map[string][]tieRow{}, byDecl: map[[2]string][]tieRow{}}
	byPod, byJob, byDecl := ix.byPod, ix.byJob, ix.byDecl
	if len(pods) > 0 {
		if err := read(stmtReportTiesPod, slices.Compact(slices.Sorted(slices.Values(pods))), func(r tieRow) {
			byPod[r.key] = append(byPod[r.key], r)
		}); err != nil {
			return nil, err
		}
	}
	if len(jobs) > 0 {
		keys := slices.Compact(slices.Sorted(slices.Values(jobs)))
		add := func(r tieRow) { byJob[r.key] = append(byJob[r.key], r) }
		if err := read(stmtReportTiesSlurm, keys, add); err != nil {
			return nil, err
		}
		if err := read(stmtReportTiesSlurmRun, keys, add); err != nil {
			return nil, err
		}
	}
	if len(decls) > 0 {
		slices.SortFunc(decls, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
		if err := read(stmtReportTiesContainer, slices.Compact(decls), func(r tieRow) {
			k := [2]string{r.tie.TaskID, r.tie.Project}
			byDecl[k] = append(byDecl[k], r)
		}); err != nil {
			return nil, err
		}
	}
	out := make([][]Tie, len(ids))
	for i := range ids {
		// A report's own users: none of its pods is seen on another
		// node by this report.
		out[i] = ix.ties(&ids[i], node, false)
	}
	return out, nil
}
