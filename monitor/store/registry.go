package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
)

// The registry: every SQL statement the store runs is a *stmt of
// statements, by name, with the index that serves it on each engine (or
// why none: stmt.fullScan, stmt.noPlan) and example arguments.
// TestStatementPlans explains every one on both engines and checks the
// index; TestNoInlineSQL fails on SQL written anywhere but in a stmt's
// text (or a registered template's builder), and on a call of
// database/sql's query methods outside the runners (Store.exec,
// Store.queryRow, Store.query, Store.queryBuilt and its kin,
// Store.pipeline), which
// refuse an unregistered statement. A new statement goes into one of the
// sets below (a set is what one path prepares or one older plan test
// walks), or into otherStatements.
//
// The registry is made at its first use (registry), after every init of
// the package: some sets are completed by their files' init functions.
var (
	registryOnce sync.Once
	statements   map[string]*stmt
	// testStatements are registered by the package's tests only.
	testStatements = map[string]*stmt{}
)

// registry returns the registry, making it at the first call.
func registry() map[string]*stmt {
	registryOnce.Do(func() {
		statements = register(writeStatements, nodeStatements, ledgerStatements, booksStatements,
			otherStatements, readStatements, maintenanceStatements, partitionStatements, reportStatements, factSumStatements(), testStatements)
	})
	return statements
}

// otherStatements are the registered statements of no set of their own.
var otherStatements = map[string]*stmt{
	"clip span":                 stmtClipSpan,
	"open conflicts":            stmtOpenConflicts,
	"statement export":          stmtExport,
	"put statement export":      stmtPutExport,
	"set close reason":          stmtSetCloseReason,
	"reopen because":            stmtReopenBecause,
	"statement notes":           stmtStatementNotes,
	"statement versions":        stmtStatementVersions,
	"statement body":            stmtStatementBody,
	"statement by project":      stmtStatementByProject,
	"statement by project/own.": stmtStatementByProjectOwner,
	"open tasks to watch":       stmtOpenToWatch,
	"oldest node hour":          stmtOldestNodeHour,
	"node last time":            stmtNodeLastTime,
	"node latest":               stmtNodeLatest,
	"nodes seen":                stmtNodesSeen,
	"observed idle":             stmtObservedIdle,
	"retention mark":            stmtRetentionMark,
	"set retention mark":        stmtSetRetentionMark,
	"ties by pod, one":          stmtTiePod,
	"ties by Slurm job, one":    stmtTieSlurm,
	"ties by Slurm run, one":    stmtTieSlurmRun,
	"ties by container, one":    stmtTieContainer,
	"trim spans":                stmtTrimSpans,
}

// factSumStatements are FactSums' statements, per grain.
func factSumStatements() map[string]*stmt {
	out := map[string]*stmt{}
	for g, sts := range factSums {
		out["fact sums of GPUs by "+g] = sts[0]
		out["fact sums of users by "+g] = sts[1]
	}
	return out
}

// register merges sets into the registry and names each statement. A
// statement may be in several sets (the advisory lock: the tasks' and
// the nodes' write paths); it keeps the first name, in the sets' order.
// Two statements under one name are a programming error.
func register(sets ...map[string]*stmt) map[string]*stmt {
	out := map[string]*stmt{}
	for _, set := range sets {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			st := set[n]
			if st.name != "" {
				continue
			}
			if _, dup := out[n]; dup {
				panic(fmt.Sprintf("store: two statements named %q", n))
			}
			st.name = n
			if st.build == nil {
				// Bound once: renumbering a long statement's
				// placeholders at every run was a fifth of a node
				// report's CPU on PostgreSQL.
				st.postgresBound = st.text(Postgres)
			}
			out[n] = st
		}
	}
	return out
}

// registered panics unless st is in the registry: a statement the plan
// test does not know is never run.
func registered(st *stmt) {
	if st == nil {
		panic("store: running a nil statement")
	}
	if reg := registry(); st.name == "" || reg[st.name] != st {
		panic("store: running a statement that is not in the registry")
	}
}

// queryBuilt runs text, an instance of the registered template st (built
// by the builder st.build calls, from this call's fragments), with its
// numbered placeholders expanded (Dialect.expand) and bound.
func (s *Store) queryBuilt(ctx context.Context, q querier, st *stmt, text string, args ...any) (*sql.Rows, error) {
	text, args = s.instance(st, text, args)
	return q.QueryContext(ctx, text, args...)
}

// execBuilt and queryRowBuilt are queryBuilt for a write (the partitions'
// DDL) and for a read of one row.
func (s *Store) execBuilt(ctx context.Context, q querier, st *stmt, text string, args ...any) (sql.Result, error) {
	text, args = s.instance(st, text, args)
	return q.ExecContext(ctx, text, args...)
}

func (s *Store) queryRowBuilt(ctx context.Context, q querier, st *stmt, text string, args ...any) *sql.Row {
	text, args = s.instance(st, text, args)
	return q.QueryRowContext(ctx, text, args...)
}

// instance is text, an instance of the registered template st, as the
// engine runs it, with its arguments: numbered placeholders expanded,
// then bound.
func (s *Store) instance(st *stmt, text string, args []any) (string, []any) {
	registered(st)
	if st.build == nil {
		panic("store: " + st.name + " is not a template")
	}
	text, args = s.dialect.expand(text, args)
	return s.bind(text), args
}

// execOn and queryRowOn run a statement of the registry on a database of
// no Store (a backup being made or checked).
func execOn(ctx context.Context, q querier, d Dialect, st *stmt, args ...any) (sql.Result, error) {
	registered(st)
	return q.ExecContext(ctx, st.text(d), args...)
}

func queryRowOn(ctx context.Context, q querier, d Dialect, st *stmt, args ...any) *sql.Row {
	registered(st)
	return q.QueryRowContext(ctx, st.text(d), args...)
}
