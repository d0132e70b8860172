package store

// NodeLatestStatementsForTest lists the reads of the nodes' latest
// reports as the store runs them, by name.
func NodeLatestStatementsForTest(s *Store) []WriteStatement {
	var out []WriteStatement
	for _, x := range []struct {
		name string
		st   *stmt
	}{{"node latest", stmtNodeLatest}, {"nodes seen", stmtNodesSeen}} {
		idx := x.st.sqliteIndex
		if s.dialect == Postgres {
			idx = x.st.postgresIndex
		}
		out = append(out, WriteStatement{Name: x.name, SQL: x.st.text(s.dialect), Index: idx, Example: x.st.example})
	}
	return out
}
