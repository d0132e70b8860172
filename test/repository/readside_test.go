package repository

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// The one read side (MONITOR.md 17, "One owner", and 20.28): every view
// reaches figures through monitor/accounts. Only it, the calculation
// packages it uses and the store that defines the statements call a
// calculation or one of the store's figure statements; a view (the HTTP
// handlers, the page, the statements, /metrics, the CLI commands) calls
// accounts.

// readSidePackages may compute figures: the read side, the calculations
// it chooses among, and the store, which defines the statements.
var readSidePackages = []string{"monitor/accounts", "monitor/report", "monitor/ledger", "monitor/books", "monitor/focus", "monitor/store/..."}

// calculations are the functions that compute figures, by package (relative
// to the module).
var calculations = map[string][]string{
	"monitor/report": {"Compute", "Chargeback"},
	"monitor/ledger": {"Compute", "Facts", "Group", "FindDiscrepancies"},
	"monitor/books":  {"Report", "Chargeback", "Adjustments", "ReportAdjustments", "KeepChargeback", "FrozenLedger"},
}

// figureStatements are the store's methods that read report or ledger
// facts (the implementations of facts.Source, report.Observer,
// report.TaskLister, report.Running and ledger.Source, and the closed
// months' reports, frozen task and ledger facts and late tasks): called on any
// value, they are a figure read.
var figureStatements = []string{
	"ReportSums", "ReportMetric", "Observations", "ReportTasks", "ReportTasksByDay", "RunningTasks",
	"LedgerData", "LedgerDataRaw", "LedgerUserHours", "LedgerTies", "TieCandidates", "DeclaredTasks", "ShareOverlaps",
	"StatementReport", "LateTasks", "TaskFacts", "StatementFacts", "StatementLedgerFacts",
}

// sourceFile is one Go file of a package: its name and text.
type sourceFile struct {
	Name string
	Src  []byte
}

// readSideViolations parses the files of each package (relative to the
// module) outside readSidePackages and returns one line per call of a
// calculation or a figure statement, sorted.
func readSideViolations(pkgs map[string][]sourceFile) ([]string, error) {
	var out []string
	for pkg, files := range pkgs {
		if matches(pkg, readSidePackages) {
			continue
		}
		for _, f := range files {
			lines, err := fileViolations(pkg, f)
			if err != nil {
				return nil, err
			}
			out = append(out, lines...)
		}
	}
	sort.Strings(out)
	return out, nil
}

// fileViolations are f's calls of a calculation or a figure statement.
func fileViolations(pkg string, f sourceFile) ([]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, f.Name, f.Src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// The file's names of the calculation packages it imports.
	imported := map[string]string{}
	for _, spec := range file.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, err
		}
		rel, ok := relative(path)
		if _, calc := calculations[rel]; !ok || !calc {
			continue
		}
		name := filepath.Base(rel)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		imported[name] = rel
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		at := fset.Position(call.Pos())
		where := fmt.Sprintf("%s: %s:%d", show(pkg), filepath.Base(at.Filename), at.Line)
		if id, ok := sel.X.(*ast.Ident); ok {
			if rel, ok := imported[id.Name]; ok {
				if slices.Contains(calculations[rel], sel.Sel.Name) {
					out = append(out, fmt.Sprintf("%s calls %s.%s (ask monitor/accounts)", where, rel, sel.Sel.Name))
				}
				return true
			}
		}
		if slices.Contains(figureStatements, sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s calls the store's figure statement %s (ask monitor/accounts)", where, sel.Sel.Name))
		}
		return true
	})
	return out, nil
}

// moduleSources are the non-test Go files of every package of the module,
// as go list names them.
func moduleSources(t *testing.T) map[string][]sourceFile {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	pkgs := map[string][]sourceFile{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		pkg, ok := relative(fields[0])
		if !ok {
			continue
		}
		for _, name := range fields[2:] {
			path := filepath.Join(fields[1], name)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pkgs[pkg] = append(pkgs[pkg], sourceFile{Name: path, Src: src})
		}
	}
	return pkgs
}

// TestOneReadSide: no package but the read side's calls a calculation or
// a figure statement of the store.
func TestOneReadSide(t *testing.T) {
	if err := harness.ChdirRoot(); err != nil {
		t.Fatal(err)
	}
	pkgs := moduleSources(t)
	for _, want := range []string{"monitor", "monitor/accounts", "cmd/paddle-monitor", "monitor/focus"} {
		if len(pkgs[want]) == 0 {
			t.Fatalf("go list names no file of package %s; is this the repository root?", show(want))
		}
	}
	broken, err := readSideViolations(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

// TestReadSideCheckerCatchesCalls: the checker fails a view that computes
// its own figures (a calculation under its own import name or renamed, a
// figure statement on the store) and passes the read side doing it, so
// TestOneReadSide's silence means something.
func TestReadSideCheckerCatchesCalls(t *testing.T) {
	view := `package monitor

import (
	"context"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	bk "github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

func page(ctx context.Context, st *store.Store, acc *accounts.Accounts) {
	acc.Report(ctx, accounts.Request{})
	report.WriteJSON(nil, nil)
	report.Compute(ctx, st, report.Query{})
	bk.Report(ctx, st, report.Query{}, false)
	st.LedgerData(ctx, 0, 0, 0)
}
`
	clean := `package monitor

import (
	"context"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

func page(ctx context.Context, acc *accounts.Accounts) {
	rep, _ := acc.Report(ctx, accounts.Request{})
	report.WriteJSON(nil, rep)
}
`
	got, err := readSideViolations(map[string][]sourceFile{
		"monitor":            {{Name: "page.go", Src: []byte(view)}},
		"cmd/paddle-monitor": {{Name: "report.go", Src: []byte(clean)}},
		"monitor/accounts":   {{Name: "accounts.go", Src: []byte(view)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"monitor: page.go:15 calls monitor/report.Compute (ask monitor/accounts)",
		"monitor: page.go:16 calls monitor/books.Report (ask monitor/accounts)",
		"monitor: page.go:17 calls the store's figure statement LedgerData (ask monitor/accounts)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the checker said:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
