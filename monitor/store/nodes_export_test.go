package store

import "sort"

// NodeStatementsForTest lists every statement of the node-report write
// path as the store runs it, by name.
func NodeStatementsForTest(s *Store) []WriteStatement {
	var out []WriteStatement
	for name, st := range nodeStatements {
		if (st.postgresOnly && s.dialect != Postgres) || (st.sqliteOnly && s.dialect != SQLite) {
			continue
		}
		idx := st.sqliteIndex
		if s.dialect == Postgres {
			idx = st.postgresIndex
		}
		out = append(out, WriteStatement{Name: name, SQL: st.text(s.dialect), Index: idx, Example: st.example})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UncoveredForTest is uncovered on spans given as pairs.
func UncoveredForTest(start, end int64, pairs [][2]int64) (int64, int64) {
	spans := make([]span, len(pairs))
	for i, p := range pairs {
		spans[i] = span{p[0], p[1]}
	}
	return uncovered(start, end, spans)
}

// LedgerStatementsForTest lists the ledger's reads the store runs, by
// name.
func LedgerStatementsForTest(s *Store) []WriteStatement {
	var out []WriteStatement
	for name, st := range ledgerStatements {
		if (st.postgresOnly && s.dialect != Postgres) || (st.sqliteOnly && s.dialect != SQLite) {
			continue
		}
		idx := st.sqliteIndex
		if s.dialect == Postgres {
			idx = st.postgresIndex
		}
		out = append(out, WriteStatement{Name: name, SQL: st.text(s.dialect), Index: idx, Example: st.example})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
