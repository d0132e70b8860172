package store_test

import (
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestSchemaParity: after the migrations, both engines hold the same
// schema: the same tables, each with the same columns (types in a common
// vocabulary, nullability), primary key, unique constraints and indexes
// (names, columns, uniqueness, partial or not). The tables are read from
// each engine's catalogue (sqlite_master, information_schema), so a table
// added by one engine's migration only, or a column of a new table
// written differently, fails here without being listed anywhere. On
// PostgreSQL a partitioned table counts as its parent.
func TestSchemaParity(t *testing.T) {
	got := map[store.Dialect][]string{}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		db := store.DBForTest(s)
		var desc []string
		if s.Dialect() == store.Postgres {
			desc = postgresSchema(t, db)
		} else {
			desc = sqliteSchema(t, db)
		}
		if len(desc) == 0 {
			t.Fatal("no tables in the catalogue")
		}
		got[s.Dialect()] = desc
	})
	a, b := got[store.SQLite], got[store.Postgres]
	if a == nil || b == nil {
		return // one engine only (PostgreSQL not required here)
	}
	only := func(x, y []string) []string {
		in := map[string]bool{}
		for _, v := range y {
			in[v] = true
		}
		var out []string
		for _, v := range x {
			if !in[v] {
				out = append(out, v)
			}
		}
		return out
	}
	if oa, ob := only(a, b), only(b, a); len(oa)+len(ob) > 0 {
		t.Fatalf("the engines' schemas differ:\nSQLite only:\n  %s\nPostgreSQL only:\n  %s",
			strings.Join(oa, "\n  "), strings.Join(ob, "\n  "))
	}
	tables := map[string]bool{}
	for _, d := range a {
		tables[strings.SplitN(d, " ", 2)[0]] = true
	}
	t.Logf("%d tables compared", len(tables))
}

// commonType maps an engine's column type to the vocabulary both share.
func commonType(t *testing.T, typ string) string {
	switch strings.ToLower(typ) {
	case "integer", "bigint", "int", "smallint":
		return "integer"
	case "real", "double precision", "double", "float":
		return "real"
	case "text", "character varying", "varchar":
		return "text"
	case "blob", "bytea":
		return "blob"
	}
	t.Fatalf("column type %q has no common name", typ)
	return ""
}

// query runs q and returns its rows as strings (NULL as "").
func query(t *testing.T, db *sql.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// describe writes a table's facts, one a line, each starting with the
// table's name.
func describe(table string, cols [][3]string, pk []string, indexes map[string]string) []string {
	var out []string
	for _, c := range cols {
		out = append(out, fmt.Sprintf("%s column %s %s %s", table, c[0], c[1], c[2]))
	}
	out = append(out, fmt.Sprintf("%s primary key (%s)", table, strings.Join(pk, ", ")))
	for k, v := range indexes {
		out = append(out, fmt.Sprintf("%s %s %s", table, k, v))
	}
	return out
}

func sqliteSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	for _, tr := range query(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`) {
		table := tr[0]
		var cols [][3]string
		pks := map[int]string{}
		for _, c := range query(t, db, `SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid`, table) {
			null := "null"
			if c[2] == "1" || c[3] != "0" { // a primary key's columns are never NULL (rowid, or NOT NULL in PostgreSQL)
				null = "not null"
			}
			cols = append(cols, [3]string{c[0], commonType(t, c[1]), null})
			if c[3] != "0" {
				var n int
				fmt.Sscan(c[3], &n)
				pks[n] = c[0]
			}
		}
		var pk []string
		for i := 1; i <= len(pks); i++ {
			pk = append(pk, pks[i])
		}
		indexes := map[string]string{}
		for _, ix := range query(t, db, `SELECT name, "unique", origin, partial FROM pragma_index_list(?)`, table) {
			if ix[2] == "pk" {
				continue
			}
			var names []string
			for _, c := range query(t, db, `SELECT name FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno`, ix[0]) {
				if c[0] == "" {
					c[0] = "(expression)"
				}
				names = append(names, c[0])
			}
			key, what := "index "+ix[0], "unique="+ix[1]+" partial="+ix[3]
			if ix[2] == "u" { // a UNIQUE constraint: the engines name its index differently
				key, what = "unique constraint", ""
			}
			indexes[key+" ("+strings.Join(names, ", ")+")"] = what
		}
		out = append(out, describe(table, cols, pk, indexes)...)
	}
	sort.Strings(out)
	return out
}

func postgresSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	// A partitioned table is compared as its parent (its columns, keys
	// and partitioned indexes); its partitions are PostgreSQL's alone
	// (TestPartitionedLayout checks them).
	for _, tr := range query(t, db, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
		AND NOT (SELECT relispartition FROM pg_class WHERE oid = to_regclass(table_name)) ORDER BY table_name`) {
		table := tr[0]
		var cols [][3]string
		for _, c := range query(t, db, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table) {
			null := "null"
			if c[2] == "NO" {
				null = "not null"
			}
			cols = append(cols, [3]string{c[0], commonType(t, c[1]), null})
		}
		var pk []string
		for _, c := range query(t, db, `SELECT k.column_name FROM information_schema.table_constraints c
			JOIN information_schema.key_column_usage k ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema
			WHERE c.table_schema = current_schema() AND c.table_name = $1 AND c.constraint_type = 'PRIMARY KEY'
			ORDER BY k.ordinal_position`, table) {
			pk = append(pk, c[0])
		}
		indexes := map[string]string{}
		for _, ix := range query(t, db, `SELECT i.relname, ix.indisunique, ix.indpred IS NOT NULL,
			EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid AND c.contype = 'u'),
			(SELECT string_agg(COALESCE(a.attname, '(expression)'), ', ' ORDER BY k.n)
			 FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n)
			 LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum AND k.attnum > 0
			 WHERE k.n <= ix.indnkeyatts)
			FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class tb ON tb.oid = ix.indrelid
			WHERE tb.relname = $1 AND tb.relnamespace = current_schema()::regnamespace AND NOT ix.indisprimary`, table) {
			unique, partial := "0", "0"
			if ix[1] == "true" {
				unique = "1"
			}
			if ix[2] == "true" {
				partial = "1"
			}
			key, what := "index "+ix[0], "unique="+unique+" partial="+partial
			if ix[3] == "true" {
				key, what = "unique constraint", ""
			}
			indexes[key+" ("+ix[4]+")"] = what
		}
		out = append(out, describe(table, cols, pk, indexes)...)
	}
	sort.Strings(out)
	return out
}
