package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// looksLikeSQL is a string literal that starts, once trimmed, like a
// statement (case-insensitive): a keyword and what must follow it, so
// that a name ("insert task") or a message ("commit: %w") is not taken
// for one.
var looksLikeSQL = regexp.MustCompile(`(?is)^\s*(SELECT(\s|$)|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|WITH(\s|$)|` +
	`CREATE\s+(TABLE|INDEX|UNIQUE|VIEW|TEMP)\b|DROP\s+(TABLE|INDEX|VIEW)\b|ALTER\s+TABLE\b|VACUUM\b|PRAGMA\s+\w|` +
	`(BEGIN|COMMIT|ROLLBACK|ANALYZE)\s*;?\s*$|ROLLBACK\s+TO\s+\w+\s*$|(SAVEPOINT|RELEASE)\s+\w+\s*$|LOCK\s+TABLE\b|EXPLAIN\s)`)

// runners are the only functions that hand SQL to database/sql, each
// taking a *stmt of the registry (registered checks it).
var runners = map[string]bool{
	"statements.go exec": true, "statements.go queryRow": true, "statements.go query": true,
	"statements.go prepareWrites": true, "statements.go pipeline": true,
	"registry.go queryBuilt": true, "registry.go execBuilt": true, "registry.go queryRowBuilt": true, "registry.go execOn": true, "registry.go queryRowOn": true,
}

// sqlMethods are the methods of database/sql (and pgx) that run SQL text.
var sqlMethods = map[string]bool{"ExecContext": true, "QueryContext": true, "QueryRowContext": true, "PrepareContext": true,
	"Exec": true, "Query": true, "QueryRow": true, "Prepare": true, "Queue": true, "SendBatch": true}

// TestNoInlineSQL: the store's non-test files write SQL only as the text
// of a registered statement: a string literal that looks like SQL appears
// only in a stmt's sql or postgresSQL field, in the function perEngine
// writes a statement with, or in a template's builder (a function or
// variable named …SQL, which a stmt's sql, build or another builder
// uses); every statement declared is in a set of the registry; and only
// the runners call database/sql's query methods (the one exception: a
// migration's step, an embedded file of migrations/).
func TestNoInlineSQL(t *testing.T) {
	for _, p := range checkInlineSQL(t, ".") {
		t.Error(p)
	}
}

// TestNoInlineSQLFailsOnInlineQuery: the check finds a query written
// inline, passed to QueryContext, in a copy of the package with one
// such file added.
func TestNoInlineSQLFailsOnInlineQuery(t *testing.T) {
	dir := t.TempDir()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		copyTestFile(t, n, filepath.Join(dir, n))
	}
	writeFile(t, filepath.Join(dir, "inline.go"), `package store

import "context"

func (s *Store) inlineCount(ctx context.Context) (n int64, err error) {
	err = s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM tasks WHERE owner = ?", "o").Scan(&n)
	return n, err
}

var stmtUnlisted = &stmt{sql: "SELECT 1 FROM tasks WHERE id = ?"}
`)
	got := strings.Join(checkInlineSQL(t, dir), "\n")
	for _, want := range []string{
		`inline.go:6:33: SQL written outside a registered statement: "SELECT COUNT(*) FROM tasks WHERE owner = ?"`,
		`inline.go:6:8: inlineCount runs SQL directly (QueryRowContext)`,
		`stmtUnlisted is in no set of the registry`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the check does not report %q; it reports:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 3 {
		t.Errorf("%d problems, want 3:\n%s", n, got)
	}
}

// checkInlineSQL lists what TestNoInlineSQL rejects in the package in dir.
func checkInlineSQL(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	declared := map[string]token.Pos{} // package-level *stmt variables
	listed := map[string]bool{}        // identifiers in a map[string]*stmt literal
	builders := map[string]bool{}      // …SQL declarations holding SQL
	used := map[string]bool{}          // identifiers used in a stmt's sql/build or a builder
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(name)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				inspectSQL(fset, d, strings.HasSuffix(d.Name.Name, "SQL"), d.Name.Name, builders, used, &problems)
				if !runners[base+" "+d.Name.Name] {
					checkCalls(fset, base, d, &problems)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, n := range vs.Names {
						if i < len(vs.Values) && d.Tok == token.VAR && isStmtValue(vs.Values[i]) {
							declared[n.Name] = n.Pos()
						}
						if i < len(vs.Values) {
							inspectSQL(fset, vs.Values[i], strings.HasSuffix(n.Name, "SQL"), n.Name, builders, used, &problems)
						}
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			// set["name"] = stmtX, in a file's init.
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
				if _, ok := as.Lhs[0].(*ast.IndexExpr); ok {
					if id, ok := as.Rhs[0].(*ast.Ident); ok {
						listed[id.Name] = true
					}
				}
			}
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if m, ok := cl.Type.(*ast.MapType); ok {
				if st, ok := m.Value.(*ast.StarExpr); ok {
					if id, ok := st.X.(*ast.Ident); ok && id.Name == "stmt" {
						for _, e := range cl.Elts {
							if kv, ok := e.(*ast.KeyValueExpr); ok {
								if id, ok := kv.Value.(*ast.Ident); ok {
									listed[id.Name] = true
								}
							}
						}
					}
				}
			}
			return true
		})
	}
	for name, pos := range declared {
		if !listed[name] {
			problems = append(problems, fset.Position(pos).String()+": "+name+" is in no set of the registry")
		}
	}
	for name := range builders {
		if !used[name] {
			problems = append(problems, name+" builds SQL that no registered statement uses")
		}
	}
	sort.Strings(problems)
	return problems
}

// isStmtValue says whether e declares a statement: &stmt{…} or a call of
// perEngine.
func isStmtValue(e ast.Expr) bool {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		if cl, ok := u.X.(*ast.CompositeLit); ok {
			id, ok := cl.Type.(*ast.Ident)
			return ok && id.Name == "stmt"
		}
	}
	if c, ok := e.(*ast.CallExpr); ok {
		id, ok := c.Fun.(*ast.Ident)
		return ok && id.Name == "perEngine"
	}
	return false
}

// inspectSQL reports the SQL-looking literals of n outside a stmt's text
// (builder: n is a …SQL declaration named name, which may hold SQL), and
// records the identifiers the statements' texts and builders use.
func inspectSQL(fset *token.FileSet, n ast.Node, builder bool, name string, builders, used map[string]bool, problems *[]string) {
	var walk func(n ast.Node, ok bool)
	walk = func(n ast.Node, ok bool) {
		ast.Inspect(n, func(c ast.Node) bool {
			switch c := c.(type) {
			case *ast.KeyValueExpr:
				if k, isID := c.Key.(*ast.Ident); isID && (k.Name == "sql" || k.Name == "postgresSQL" || k.Name == "build") {
					markUsed(c.Value, used)
					walk(c.Value, true)
					return false
				}
			case *ast.CallExpr:
				if f, isID := c.Fun.(*ast.Ident); isID && f.Name == "perEngine" {
					markUsed(c, used)
					for _, a := range c.Args {
						walk(a, true)
					}
					return false
				}
			case *ast.BasicLit:
				if c.Kind != token.STRING {
					return true
				}
				v, err := strconv.Unquote(c.Value)
				if err != nil || !looksLikeSQL.MatchString(v) {
					return true
				}
				if builder {
					builders[name] = true
					return true
				}
				if !ok {
					*problems = append(*problems, fset.Position(c.Pos()).String()+": SQL written outside a registered statement: "+
						strconv.Quote(strings.Join(strings.Fields(v), " ")))
				}
			}
			return true
		})
	}
	if builder {
		markUsed(n, used)
		used[name] = used[name] || false
	}
	walk(n, false)
}

// markUsed records every identifier under n except a builder's own name.
func markUsed(n ast.Node, used map[string]bool) {
	ast.Inspect(n, func(c ast.Node) bool {
		switch c := c.(type) {
		case *ast.Ident:
			used[c.Name] = true
		case *ast.SelectorExpr:
			used[c.Sel.Name] = true
		}
		return true
	})
}

// checkCalls reports the calls of fn that run SQL text outside the
// runners. A migration's step (migrate.go, migrateStep) runs an embedded
// file of migrations/ as it is.
func checkCalls(fset *token.FileSet, file string, fn *ast.FuncDecl, problems *[]string) {
	ast.Inspect(fn, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !sqlMethods[sel.Sel.Name] {
			return true
		}
		if file == "migrate.go" && fn.Name.Name == "migrateStep" && len(call.Args) == 2 {
			if id, ok := call.Args[1].(*ast.Ident); ok && id.Name == "step" {
				return true
			}
		}
		*problems = append(*problems, fset.Position(call.Pos()).String()+": "+fn.Name.Name+" runs SQL directly ("+sel.Sel.Name+
			"); run a registered *stmt through Store.exec, queryRow, query or queryBuilt")
		return true
	})
}

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
