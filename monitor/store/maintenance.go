package store

// The statements of maintenance, schema and transaction control: backups
// (backup.go), the migrations' bookkeeping (migrate.go; the migrations
// themselves are the embedded files of migrations/, run as they are) and
// the locks and transactions of closing a month (closemonth.go). None has
// a plan an index could serve: each says why (stmt.noPlan, stmt.fullScan).
var (
	stmtVacuumInto     = &stmt{sql: "VACUUM INTO ?", sqliteOnly: true, noPlan: "maintenance: a backup copies the whole database"}
	stmtIntegrityCheck = &stmt{sql: "PRAGMA integrity_check", sqliteOnly: true,
		noPlan: "maintenance: a backup's check reads every page"}
	stmtCountTasks = &stmt{sql: "SELECT COUNT(*) FROM tasks", sqliteOnly: true,
		fullScan: "a backup's check counts every task it holds"}
	stmtCountStatements = &stmt{sql: "SELECT COUNT(*) FROM statements", sqliteOnly: true,
		fullScan: "a backup's check counts every closed-month statement it holds"}

	stmtSchemaVersion       = &stmt{sql: "SELECT version FROM schema_version", fullScan: "schema_version holds one row"}
	stmtMigrateLock         = &stmt{sql: "SELECT pg_advisory_xact_lock(112971004210810)", postgresOnly: true, noPlan: "a migration's lock: no table"}
	stmtCreateSchemaVersion = &stmt{sql: "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", noPlan: "DDL"}
	stmtInsertSchemaVersion = &stmt{sql: "INSERT INTO schema_version (version) VALUES (0)"}
	stmtSetSchemaVersion    = &stmt{sql: "UPDATE schema_version SET version = ?", fullScan: "schema_version holds one row",
		example: []any{int64(1)}}

	stmtLockTasks = &stmt{sql: "LOCK TABLE tasks, task_gpus IN SHARE MODE", postgresOnly: true,
		noPlan: "a lock: closing a month holds the tasks still while it reads them"}
	stmtBegin  = &stmt{sql: "BEGIN", sqliteOnly: true, noPlan: "transaction control: closing a month's one snapshot"}
	stmtCommit = &stmt{sql: "COMMIT", sqliteOnly: true, noPlan: "transaction control: closing a month's one snapshot"}
)

// maintenanceStatements are the statements above, by name.
var maintenanceStatements = map[string]*stmt{
	"backup: vacuum into":      stmtVacuumInto,
	"backup: integrity check":  stmtIntegrityCheck,
	"backup: count tasks":      stmtCountTasks,
	"backup: count statements": stmtCountStatements,
	"schema version":           stmtSchemaVersion,
	"migration lock":           stmtMigrateLock,
	"create schema_version":    stmtCreateSchemaVersion,
	"insert schema version":    stmtInsertSchemaVersion,
	"set schema version":       stmtSetSchemaVersion,
	"close month: lock tasks":  stmtLockTasks,
	"close month: begin":       stmtBegin,
	"close month: commit":      stmtCommit,
}

func init() {
	for _, g := range Grains {
		if g != "hour" {
			readStatements["billing users ("+g+")"] = billingUsersByGrain[g]
		}
		readStatements["billing buckets ("+g+")"] = billingBucketsByGrain[g]
	}
}

// readStatements are the reads of no set of their own: tasks and open
// tasks (read.go, opentasks.go), billing (billing.go), the ledger's
// lives, raw reports and declared tasks, the spans, the serving inputs.
var readStatements = map[string]*stmt{
	"task by task_id":       stmtTaskByID,
	"tasks":                 stmtTasks,
	"project owners":        stmtProjectOwners,
	"tasks' GPUs":           stmtTasksGPUs,
	"open tasks":            stmtOpenTasks,
	"open tasks, limited":   stmtOpenTasksLimit,
	"open tasks' GPUs":      stmtOpenTaskGPUs,
	"running tasks":         stmtRunningTasks,
	"running tasks' GPUs":   stmtRunningTaskGPUs,
	"billing identity":      stmtBillingIdentity,
	"billing task":          stmtBillingTask,
	"billing task's GPUs":   stmtBillingTaskGPUs,
	"billing users (hour)":  billingUsersByGrain["hour"],
	"billing user times":    stmtBillingUserTimes,
	"billing untied hours":  stmtBillingUntiedHours,
	"billing untied, all":   stmtBillingUntiedAll,
	"GPU holders":           stmtGPUHolders,
	"covered tasks":         stmtCoveredTasks,
	"ledger lives":          stmtLedgerLives,
	"ledger raw reports":    stmtLedgerRaw,
	"declared tasks":        stmtDeclaredTasks,
	"spans in window":       stmtSpansIn,
	"raw reports since":     stmtRawSince,
	"node facts in window":  stmtNodeFactsIn,
	"record serving inputs": stmtRecordInputs,
	"live serving inputs":   stmtLiveInputs,
	"forget serving inputs": stmtForgetInputs,
}
