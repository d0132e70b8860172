package store

// The report's statements (report.go, chargeback.go, overlaps.go,
// billing's coveredTasks): templates, assembled per call from span
// (spanSQL) and the grouping columns, written with the report's numbered
// placeholders (?1 the window's start, ?2 its end, ?3 the metric) and run
// by Store.reportQuery. Each is registered with a representative instance:
// grouped by project and owner and a label, or by model where the
// statement is the model's; the window the plan test binds is a day near
// the end of its data, as a month's window is. Span's four sets of tasks
// are read each by its own index (spanBranches); the one named here is
// the first set's, tasks_start_time, and the plan test also checks that
// no table of the tasks is read without an index.
var (
	reportKeys      = []string{"project", "owner", "label:team"}
	reportModelKeys = []string{"project", "owner", "model"}
	reportWindow    = []any{int64(1705800000), int64(1705900000), "eval.accuracy"}

	// The metric counts tasks that ended in the window: the planners
	// read span's first set by the end's range (pushed
	// down), the others as span does.
	stmtReportMetric = &stmt{build: func(d Dialect) string {
		_, q, err := (&Store{dialect: d}).reportMetricSQL(reportKeys[:2])
		if err != nil {
			panic(err)
		}
		return q
	}, sqliteIndex: "tasks_end_start", postgresIndex: "tasks_end_time", example: reportWindow}
	stmtReportTasks = &stmt{build: func(d Dialect) string { return (&Store{dialect: d}).reportTasksSQL(reportKeys) },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: reportWindow}
	stmtReportGPUs = &stmt{build: func(d Dialect) string { return (&Store{dialect: d}).reportGPUsSQL(reportModelKeys) },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: reportWindow}
	// PostgreSQL computes unlistedOnly's NOT EXISTS as a hashed subplan,
	// which reads task_gpus whole (200,000 rows in the plan test), even in
	// the read session; SQLite looks each task up on task_gpus' primary
	// key. Known: a by-model report's base sums on PostgreSQL.
	stmtReportBase = &stmt{build: func(d Dialect) string { return (&Store{dialect: d}).reportBaseSQL(reportKeys) },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: reportWindow,
		postgresFullScan: "unlistedOnly's NOT EXISTS is a hashed subplan over task_gpus whole"}
	stmtReportModels = &stmt{build: func(d Dialect) string { return (&Store{dialect: d}).reportModelsSQL(reportModelKeys) },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: reportWindow}
	stmtReportTaskList = &stmt{build: func(Dialect) string { return reportTaskListSQL },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: reportWindow}
	stmtShareOverlaps = &stmt{build: func(Dialect) string { return shareOverlapsSQL },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: reportWindow}
)

func init() {
	// Run by reportQuery: on PostgreSQL in its read session (readSettings).
	for _, st := range []*stmt{stmtReportMetric, stmtReportTasks, stmtReportGPUs, stmtReportBase, stmtReportModels,
		stmtReportTaskList, stmtShareOverlaps, stmtCoveredTasks} {
		st.readSession = true
	}
}

// reportStatements are the report's statements and its read settings, by
// name.
var reportStatements = map[string]*stmt{
	"report metric":         stmtReportMetric,
	"report task sums":      stmtReportTasks,
	"report GPU sums":       stmtReportGPUs,
	"report base sums":      stmtReportBase,
	"report model sums":     stmtReportModels,
	"report task list":      stmtReportTaskList,
	"report share overlaps": stmtShareOverlaps,
	"report read settings":  stmtReadSettings,
}
