package store

import "sort"

// BooksStatementsForTest lists the statements of closing, late data and
// retention, by name, as WriteStatementsForTest does the write path's.
func BooksStatementsForTest(s *Store) []WriteStatement {
	var out []WriteStatement
	for name, st := range booksStatements {
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

// StatementsVersionForTest is the schema version that brings the
// statements.
func StatementsVersionForTest() int { return statementsVersion }
