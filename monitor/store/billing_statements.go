package store

// The statements of billing from observations (billing.go,
// billing_segments.go, billing_unattributed.go), in the registry
// (readStatements).

var (
	// A user's identity columns, for a user_key that does not split back
	// into them (a field holding the separator): the primary key's hour
	// range.
	stmtBillingIdentity = &stmt{sql: `SELECT runtime, container_id, pod_uid, namespace, pod, container, slurm_job, uid, cgroup,
		declared, declared_task_id, declared_project, declared_owner
		FROM node_user_hours WHERE hour >= ? AND hour < ? AND node = ? AND user_key = ? LIMIT 1`,
		sqliteIndex: "sqlite_autoindex_node_user_hours_1", postgresIndex: "node_user_hours_pkey",
		example: []any{int64(1796130000), int64(1796151600), "node-1", "u1"}}
	// tasks' primary key, one lookup per attributed task; its counted end
	// as the report's span counts it (countedEnd).
	stmtBillingTask = &stmt{sql: `SELECT tk.task_id, tk.task_name, tk.project, tk.owner, tk.priority, tk.env, tk.pipeline, tk.step, tk.hostname,
		tk.gpu_count, tk.gpu_unlisted, tk.start_time, tk.end_time, ` + countedEnd + `,
		CASE WHEN tk.end_time IS NOT NULL AND (tk.exit_code <> 0 OR tk.gate_passed = 0) THEN 1 ELSE 0 END, tk.k8s_node
		FROM tasks tk WHERE tk.id = ?`,
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(1)}}
	// task_gpus' primary key (task_key, position).
	stmtBillingTaskGPUs = &stmt{sql: `SELECT model, CASE WHEN gpu_instance_id IS NULL THEN 0 ELSE 1 END, mig_profile, share, COALESCE(samples, 0), idle_share,
		util_mean, energy_joules, uuid, COALESCE(gpu_instance_id, -1) FROM task_gpus WHERE task_key = ? ORDER BY position`,
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey", example: []any{int64(1)}}
	// billingUsers and billingUserTimes are templates: the window's first
	// and last hours, when not whole, are written into them (hourPart).
	stmtBillingUntiedHours = &stmt{build: func(Dialect) string { return billingUntiedHoursSQL(hourPart(1796130000, 1796151600+1800)) },
		sqliteIndex: "sqlite_autoindex_node_user_hours_1", postgresIndex: "node_user_hours_pkey",
		example: []any{int64(1796130000), int64(1796151600 + 3600), "node-1", "u1", 0, "", "", 0, 0}}
	stmtBillingUntiedAll = &stmt{build: func(Dialect) string { return billingUntiedAllSQL(hourPart(1796130000, 1796151600+1800)) },
		sqliteIndex: "sqlite_autoindex_node_user_hours_1", postgresIndex: "node_user_hours_pkey",
		example: []any{int64(1796130000), int64(1796151600 + 3600)}}
	stmtBillingUserTimes = &stmt{build: func(Dialect) string { return billingUserTimesSQL(hourPart(1796130000, 1796151600+1800)) },
		sqliteIndex: "sqlite_autoindex_node_user_hours_1", postgresIndex: "node_user_hours_pkey",
		example: []any{int64(1796130000), int64(1796151600 + 3600), "node-1", "u1", 0, "", "", 0, 0}}
	// gpuHolders: every (node, GPU UUID) the ledger has held (node_gpus),
	// by its primary key (node, uuid, first_start).
	stmtGPUHolders = &stmt{sql: `SELECT DISTINCT node, uuid FROM node_gpus`,
		fullScan: "every GPU life the ledger holds: the list is the answer"}
	// coveredTasks: the report's span (a template of spanSQL's, run as the
	// report's statements are).
	stmtCoveredTasks = &stmt{build: func(Dialect) string { return coveredTasksSQL },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: []any{int64(1705800000), int64(1705900000)}}
	// windowTasks' GPUs: the span's tasks joined to task_gpus by its
	// primary key (as spanModels joins them).
	stmtBillingWindowGPUs = &stmt{build: func(Dialect) string { return billingWindowGPUsSQL },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: []any{int64(1705800000), int64(1705900000)}}
)

// billingUsersByGrain and billingBucketsByGrain are the templates of
// billingUsersSQL and billingBucketsSQL at each grain, each served by its
// table's primary key (the hours' instance with a part of an hour, as a
// window that is not whole hours reads it).
var billingUsersByGrain, billingBucketsByGrain = func() (users, buckets map[string]*stmt) {
	users, buckets = map[string]*stmt{}, map[string]*stmt{}
	for _, g := range Grains {
		table := "node_user_" + g + "s"
		part := ""
		if g == "hour" {
			part = hourPart(1796130000, 1796151600+1800)
		}
		users[g] = &stmt{build: func(Dialect) string { return billingUsersSQL(g, part) },
			sqliteIndex: "sqlite_autoindex_" + table + "_1", postgresIndex: table + "_pkey",
			example: []any{int64(1796130000), int64(1796151600 + 3600)}}
		buckets[g] = &stmt{build: func(Dialect) string { return billingBucketsSQL(g) },
			sqliteIndex: "sqlite_autoindex_" + table + "_1", postgresIndex: table + "_pkey",
			example: []any{int64(1796130000), int64(1796151600 + 3600), "node-1", "u1", 0, "", "", 0, 0}}
	}
	return users, buckets
}()

func init() {
	// Run by reportQuery, as stmtCoveredTasks: on PostgreSQL in the
	// report's read session.
	stmtBillingWindowGPUs.readSession = true
	readStatements["billing window's GPUs"] = stmtBillingWindowGPUs
}
