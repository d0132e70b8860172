package store

import (
	"cmp"
	"context"
	"database/sql"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// DBForTest exposes the connection pool to this package's tests.
func DBForTest(s *Store) *sql.DB { return s.r }

// WriteStatement is a statement of the write path as the store runs it on
// one dialect (placeholders bound), with the index its plan must use.
type WriteStatement struct {
	Name, SQL, Index string
	Example          []any
}

// WriteStatementsForTest lists every statement of the write path, by name.
func WriteStatementsForTest(s *Store) []WriteStatement {
	var out []WriteStatement
	for name, st := range writeStatements {
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

// OpenAtVersionForTest opens dsn with the migrations up to version v only
// (a database of an older schema, for the upgrade tests).
func OpenAtVersionForTest(ctx context.Context, dsn string, v int) (*Store, error) {
	return Open(ctx, dsn, Options{maxVersion: v})
}

// SpanBranchesForTest are the report span's sets of tasks as statements
// of their own (SELECT tk.id, the window's ends as placeholders), each
// with the index that must serve it.
func SpanBranchesForTest(s *Store) []WriteStatement {
	var out []WriteStatement
	for _, b := range spanBranches {
		// near the end of the plan test's data, as a month's window is
		where, args := s.dialect.expand(b.where, []any{int64(1705900000), int64(1705900000)})
		out = append(out, WriteStatement{Name: b.index, SQL: s.bind("SELECT tk.id FROM tasks tk WHERE " + where), Index: b.index, Example: args})
	}
	return out
}

// VersionBeforeForTest is the schema version just before the migration
// file whose name starts with prefix ("0013"): the number of files before
// it.
func VersionBeforeForTest(prefix string) int {
	names, _ := fs.Glob(migrationFiles, "migrations/sqlite/*.sql")
	sort.Strings(names)
	for i, n := range names {
		if strings.HasPrefix(path.Base(n), prefix) {
			return i
		}
	}
	return -1
}

// stmtOracleForTest is the template the separate-queries oracle
// (separate_test.go) runs its own report statements under: registered in
// the test binary only.
var stmtOracleForTest = &stmt{build: func(Dialect) string { return "SELECT 1" }, noPlan: "a test's oracle"}

func init() { testStatements["test: separate-queries oracle"] = stmtOracleForTest }

// Statement is a registered statement as the store runs it on one
// dialect (a template's representative instance; placeholders bound),
// with the index its plan must use, or why it has none.
type Statement struct {
	WriteStatement
	FullScan, NoPlan string
	Template         bool
	// ReadSettings is the session the statement runs in (the report's on
	// PostgreSQL), "" for none.
	ReadSettings string
}

// StatementsForTest lists every statement of the registry the store's
// dialect runs, by name.
func StatementsForTest(s *Store) []Statement {
	var out []Statement
	for name, st := range registry() {
		if (st.postgresOnly && s.dialect != Postgres) || (st.sqliteOnly && s.dialect != SQLite) || st == stmtOracleForTest {
			continue
		}
		idx := st.sqliteIndex
		if s.dialect == Postgres {
			idx = st.postgresIndex
		}
		ex := st.example
		if st.build != nil {
			_, ex = s.dialect.expand(st.build(s.dialect), st.example)
		}
		out = append(out, Statement{WriteStatement: WriteStatement{Name: name, SQL: st.text(s.dialect), Index: idx, Example: ex},
			FullScan: cmp.Or(st.fullScan, map[bool]string{true: st.postgresFullScan}[s.dialect == Postgres]), NoPlan: st.noPlan, Template: st.build != nil})
		if st.readSession && s.dialect.readSettings() != nil {
			out[len(out)-1].ReadSettings = s.dialect.readSettings().text(s.dialect)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
