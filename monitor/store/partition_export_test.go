package store

// PruningReadsForTest are a raw read (the ledger's raw reports) and the
// hourly reads (the ledger's sums) as the store runs them on PostgreSQL,
// without their windows' values.
func PruningReadsForTest() (raw string, hours []string) {
	return stmtLedgerRaw.text(Postgres), []string{stmtLedgerGPUSums.text(Postgres), stmtLedgerUserSums.text(Postgres)}
}
