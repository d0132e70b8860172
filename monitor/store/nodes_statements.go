package store

// The statements of the node-report write path (nodes.go), with the index
// each must be served by; TestNodeWritePlans explains each on both stores
// with statistics, as TestWritePlans does for the tasks' write path.
var (
	stmtNodeReportStored = &stmt{sql: "SELECT body FROM node_reports WHERE node = ? AND time = ?",
		sqliteIndex: "sqlite_autoindex_node_reports_1", postgresIndex: "node_reports_pkey", example: []any{"n", int64(1796133600)}}
	// nodeSpans: the stored spans of the node that may overlap [a, b):
	// those of reports whose time is after a (a span ends at or before its
	// report's time), starting before b.
	stmtNodeSpans = &stmt{sql: `SELECT span_start, span_end, time, received_at FROM node_reports
		WHERE node = ? AND time > ? AND span_start < ? ORDER BY time`,
		sqliteIndex: "sqlite_autoindex_node_reports_1", postgresIndex: "node_reports_pkey", example: []any{"n", int64(1), int64(2)}}
	stmtInsertNodeReport = &stmt{sql: `INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, final, body, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		sqliteIndex: "", postgresIndex: "", example: []any{"n", int64(1), int64(1), int64(0), int64(1), int64(0), "{}", int64(1)}}
	// openLives: the open lives of a report's GPU UUIDs (a JSON array),
	// on every node: each GPU's own node's to extend, and another node's,
	// reported after the report's time − --node-retire, a claim that
	// refuses the report (409); a seek of node_gpus_uuid per UUID. On
	// PostgreSQL a lateral subquery, fenced: the planner would hash a
	// small node_gpus whole against the list's guessed 100 rows.
	stmtOpenLives = perEngine(func(d Dialect) string {
		if d == Postgres {
			return `SELECT j.value, g.node, g.first_start, g.last_end FROM ` + d.keyList("j") + ` CROSS JOIN LATERAL
		(SELECT node, first_start, last_end FROM node_gpus WHERE uuid = j.value AND ended_at IS NULL ` + d.fence() + `) g`
		}
		return `SELECT g.uuid, g.node, g.first_start, g.last_end FROM ` + d.keyList("j") + ` JOIN node_gpus g ON g.uuid = j.value
		WHERE g.ended_at IS NULL`
	}, &stmt{sqliteIndex: "node_gpus_uuid", postgresIndex: "node_gpus_uuid", example: []any{`["GPU-1", "GPU-2"]`}})
	// insertLife: a new life; on a life of the same start (an ended one)
	// the span extends it, and its end, so that no covered instant is
	// outside every life.
	stmtInsertLife = &stmt{sql: `INSERT INTO node_gpus (node, uuid, first_start, last_end, model) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (node, uuid, first_start) DO UPDATE SET
		last_end = CASE WHEN node_gpus.last_end < excluded.last_end THEN excluded.last_end ELSE node_gpus.last_end END,
		ended_at = CASE WHEN node_gpus.ended_at < excluded.last_end THEN excluded.last_end ELSE node_gpus.ended_at END`,
		postgresIndex: "node_gpus_pkey", example: []any{"n", "GPU-1", int64(1), int64(2), "m"}}
	stmtExtendLife = &stmt{sql: `UPDATE node_gpus SET first_start = CASE WHEN first_start > ? THEN ? ELSE first_start END,
		last_end = CASE WHEN last_end < ? THEN ? ELSE last_end END, model = ?
		WHERE node = ? AND uuid = ? AND first_start = ?`,
		sqliteIndex: "sqlite_autoindex_node_gpus_1", postgresIndex: "node_gpus_pkey",
		example: []any{int64(1), int64(1), int64(2), int64(2), "m", "n", "GPU-1", int64(1)}}
	// endLife: a life whose last report is older than --node-retire ends
	// there (endLives: a final report, node retire).
	stmtEndLife = &stmt{sql: "UPDATE node_gpus SET ended_at = ? WHERE node = ? AND uuid = ? AND first_start = ?",
		sqliteIndex: "sqlite_autoindex_node_gpus_1", postgresIndex: "node_gpus_pkey", example: []any{int64(1), "n", "GPU-1", int64(1)}}
	// endLives: at the given time, or at the life's last covered instant
	// when that is later (a final report arriving after newer ones).
	stmtEndLives = &stmt{sql: "UPDATE node_gpus SET ended_at = CASE WHEN last_end > ? THEN last_end ELSE ? END WHERE node = ? AND ended_at IS NULL",
		sqliteIndex: "node_gpus_open", postgresIndex: "node_gpus_open", example: []any{int64(1), int64(1), "n"}}
	stmtUpsertNode = &stmt{sql: `INSERT INTO nodes (node, last_time, interval_seconds, latest) VALUES (?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET last_time = excluded.last_time, interval_seconds = excluded.interval_seconds,
		latest = excluded.latest, retired_at = NULL WHERE nodes.last_time < excluded.last_time`,
		postgresIndex: "nodes_pkey", example: []any{"n", int64(1), int64(60), "{}"}}
	stmtRetireNode = &stmt{sql: "UPDATE nodes SET retired_at = ? WHERE node = ?",
		sqliteIndex: "sqlite_autoindex_nodes_1", postgresIndex: "nodes_pkey", example: []any{int64(1), "n"}}
	// The hourly roll-ups' upserts, one row each (factUpserts: their
	// multi-row forms).
	stmtUpsertGPUHour  = gpuFactUpsert("hour", 1)
	stmtUpsertUserHour = userFactUpsert("hour", 1)
	// pruneNodeReports: on PostgreSQL the days before the cut are dropped
	// first (partition_keep.go): this deletes in the day straddling it
	// (the example's, in the plan tests' month) and the default partition.
	stmtPruneNodeReports = &stmt{sql: "DELETE FROM node_reports WHERE time < ?",
		sqliteIndex: "node_reports_time", postgresIndex: "node_reports_time", example: []any{int64(1796133600)}}
)

// Ties of a report's users to registrations (ledger_ties.go, TieCandidates;
// and the idleness of the latest report's tasks).
var (
	// tiePod: a registration of the pod UID whose k8s_node is the
	// report's node or empty (a node cannot bill a pod of another node).
	stmtTiePod = &stmt{sql: `SELECT id, task_id, project, owner, start_time FROM tasks
		WHERE k8s_pod_uid = ? AND k8s_pod_uid <> '' AND (k8s_node = '' OR lower(k8s_node) = ?) ORDER BY start_time, id`,
		sqliteIndex: "tasks_k8s_pod_uid", postgresIndex: "tasks_k8s_pod_uid", example: []any{"pod", "n"}}
	// tieSlurm: a registration of the same node (its hostname or
	// k8s_node) with the same Slurm job, naming no pod UID.
	stmtTieSlurm = &stmt{sql: `SELECT id, task_id, project, owner, start_time FROM tasks
		WHERE slurm_job = ? AND slurm_job <> '' AND k8s_pod_uid = '' AND (hostname = ? OR lower(k8s_node) = ?) ORDER BY start_time, id`,
		sqliteIndex: "tasks_slurm_job", postgresIndex: "tasks_slurm_job", example: []any{"42", "n", "n"}}
	// tieSlurmRun: the same for a registration that names its job as
	// its pipeline run (orchestrator slurm, SLURM_JOB_ID).
	stmtTieSlurmRun = &stmt{sql: `SELECT id, task_id, project, owner, start_time FROM tasks
		WHERE pipeline_run = ? AND orchestrator = 'slurm' AND pipeline_run <> '' AND k8s_pod_uid = ''
		AND (hostname = ? OR lower(k8s_node) = ?) ORDER BY start_time, id`,
		sqliteIndex: "tasks_slurm_run", postgresIndex: "tasks_slurm_run", example: []any{"42", "n", "n"}}
	// tieContainer: the declared task of a container whose host name is
	// the container's default one or whose k8s_node is the report's node,
	// never one that names a pod UID (the container has none: NODE.md 11).
	stmtTieContainer = &stmt{sql: `SELECT id, task_id, project, owner, start_time FROM tasks
		WHERE task_id = ? AND project = ? AND (? = '' OR owner = ?) AND k8s_pod_uid = '' AND (hostname = ? OR lower(k8s_node) = ?)
		ORDER BY start_time, id`,
		sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity", example: []any{"plan-000001", "p01", "", "", "h", "n"}}
	// observedIdle: the idleness of an open task from its node's latest
	// report (idle: kept, or set to the report's start; busy: cleared).
	stmtObservedIdle = &stmt{sql: `UPDATE tasks SET
		idle_since = CASE WHEN ? = 1 THEN COALESCE(idle_since, ?) END,
		observed_at = ?,
		last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END
		WHERE id = ? AND end_time IS NULL`,
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey",
		example: []any{int64(1), int64(1), int64(2), int64(2), int64(2), int64(1)}}
	stmtNodeLastTime = &stmt{sql: "SELECT last_time FROM nodes WHERE node = ?",
		sqliteIndex: "sqlite_autoindex_nodes_1", postgresIndex: "nodes_pkey", example: []any{"n"}}
)

// SQLite's plan of an INSERT … ON CONFLICT names no index (its conflict
// target is its primary key); PostgreSQL's names the arbiter.

// nodeStatements is every statement of the node-report write path, by
// name (the plan tests' subtests).
var nodeStatements = map[string]*stmt{
	"node report stored":       stmtNodeReportStored,
	"node spans":               stmtNodeSpans,
	"insert node report":       stmtInsertNodeReport,
	"open GPU lives":           stmtOpenLives,
	"insert GPU life":          stmtInsertLife,
	"extend GPU life":          stmtExtendLife,
	"end GPU life":             stmtEndLife,
	"end GPU lives":            stmtEndLives,
	"upsert node":              stmtUpsertNode,
	"retire node":              stmtRetireNode,
	"upsert GPU hour":          stmtUpsertGPUHour,
	"upsert user hour":         stmtUpsertUserHour,
	"upsert GPU day":           stmtUpsertGPUDay,
	"upsert GPU month":         stmtUpsertGPUMonth,
	"upsert user day":          stmtUpsertUserDay,
	"upsert user month":        stmtUpsertUserMonth,
	"prune node reports":       stmtPruneNodeReports,
	"lock node":                stmtLockTask,
	"upsert GPU conflict":      stmtUpsertConflict,
	"resolve held GPUs":        stmtResolveHeld,
	"resolve conflicting GPUs": stmtResolveConflicting,
	"report cut":               stmtReportCut,
	"node UID":                 stmtNodeUID,
	"set node UID":             stmtSetNodeUID,
	"spans near":               stmtSpansNear,
	"delete span":              stmtSpanDelete,
	"insert span":              stmtSpanInsert,
}

// The ledger's reads (ledger.go, ledger_ties.go): the window's roll-ups
// summed in SQL, and the ties of all its users to registrations, one
// statement per tie rule (the users' keys passed as one JSON array).
const userHourColumns = `node, uuid, gpu_instance_id, model, profile, slices, total_slices, runtime, container_id, pod_uid,
		namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id, declared_project, declared_owner`

// userKeyColumns: the same with the identity as user_key, the
// concatenation of its columns (UserIdentity.Key), read back from it
// (keyedUserHours): one column for thirteen, of every user of a window.
const userKeyColumns = `node, uuid, gpu_instance_id, model, profile, slices, total_slices, user_key`

var (
	// ledgerGPUSums: node_gpu_hours' primary key (hour first).
	stmtLedgerGPUSums = &stmt{sql: `SELECT node, uuid, model, MIN(hour), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
		FROM node_gpu_hours WHERE hour >= ? AND hour < ? GROUP BY node, uuid, model`,
		sqliteIndex: "sqlite_autoindex_node_gpu_hours_1", postgresIndex: "node_gpu_hours_pkey", example: []any{int64(1796130000), int64(1796133600)}}
	// ledgerUserSums: node_user_hours' primary key (hour first).
	stmtLedgerUserSums = &stmt{sql: `SELECT MIN(hour), ` + userKeyColumns + `, MIN(last_time), MAX(last_time),
		SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
		FROM node_user_hours WHERE hour >= ? AND hour < ? GROUP BY node, uuid, gpu_instance_id, user_key, model, profile, slices, total_slices`,
		sqliteIndex: "sqlite_autoindex_node_user_hours_1", postgresIndex: "node_user_hours_pkey", example: []any{int64(1796130000), int64(1796133600)}}
	// ledgerUserHours: one user's hours; node_user_hours' primary key.
	stmtLedgerUserHours = &stmt{sql: `SELECT hour, ` + userHourColumns + `, last_time, last_time,
		equal_s, util_s, busy_equal_s, busy_util_s, energy_j
		FROM node_user_hours WHERE hour >= ? AND hour < ? AND node = ? AND uuid = ? AND gpu_instance_id = ? AND user_key = ?`,
		sqliteIndex: "sqlite_autoindex_node_user_hours_1", postgresIndex: "node_user_hours_pkey",
		example: []any{int64(1796130000), int64(1796133600), "n", "GPU-1", int64(-1), "k"}}

	// The ties (TieCandidates' rules, for a JSON array of keys): through
	// tasks_k8s_pod_uid, tasks_slurm_job, tasks_slurm_run and
	// tasks_identity, one seek per key.
	stmtTiesPod = perEngine(func(d Dialect) string {
		return `SELECT t.k8s_pod_uid, t.id, t.task_id, t.project, t.owner, t.start_time, t.hostname, t.k8s_node, t.k8s_pod_uid
		FROM ` + d.keyList("j") + ` JOIN tasks t ON t.k8s_pod_uid = j.value WHERE t.k8s_pod_uid <> ''`
	}, &stmt{sqliteIndex: "tasks_k8s_pod_uid", postgresIndex: "tasks_k8s_pod_uid", example: []any{`["pod"]`}})
	stmtTiesSlurm = perEngine(func(d Dialect) string {
		return `SELECT t.slurm_job, t.id, t.task_id, t.project, t.owner, t.start_time, t.hostname, t.k8s_node, t.k8s_pod_uid
		FROM ` + d.keyList("j") + ` JOIN tasks t ON t.slurm_job = j.value WHERE t.slurm_job <> ''`
	}, &stmt{sqliteIndex: "tasks_slurm_job", postgresIndex: "tasks_slurm_job", example: []any{`["42"]`}})
	stmtTiesSlurmRun = perEngine(func(d Dialect) string {
		return `SELECT t.pipeline_run, t.id, t.task_id, t.project, t.owner, t.start_time, t.hostname, t.k8s_node, t.k8s_pod_uid
		FROM ` + d.keyList("j") + ` JOIN tasks t ON t.pipeline_run = j.value
		WHERE t.orchestrator = 'slurm' AND t.pipeline_run <> ''`
	}, &stmt{sqliteIndex: "tasks_slurm_run", postgresIndex: "tasks_slurm_run", example: []any{`["42"]`}})
	// tiesContainer: keys [task_id, project].
	stmtTiesContainer = perEngine(func(d Dialect) string {
		return `SELECT t.task_id, t.id, t.task_id, t.project, t.owner, t.start_time, t.hostname, t.k8s_node, t.k8s_pod_uid
		FROM ` + d.pairList("j") + ` JOIN tasks t ON t.task_id = j.k0 AND t.project = j.k1`
	}, &stmt{sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity", example: []any{`[["t", "p"]]`}})
)

// ledgerStatements are the ledger's reads, by name (TestLedgerPlans).
var ledgerStatements = map[string]*stmt{
	"ledger GPU sums":   stmtLedgerGPUSums,
	"ledger user sums":  stmtLedgerUserSums,
	"ledger user hours": stmtLedgerUserHours,
	"ties by pod":       stmtTiesPod,
	"ties by Slurm job": stmtTiesSlurm,
	"ties by Slurm run": stmtTiesSlurmRun,
	"ties by container": stmtTiesContainer,
}
