package store

import (
	"context"
	"database/sql"
	"fmt"
)

// The ledger facts a statement freezes (migration 0020, MONITOR.md 17
// invariant 3, 20.10): the month's ledger at the finest key it groups by,
// as the close computed it (package ledger gathers them, books freezes
// them). A closed month's ledger by any --by and scope is these grouped
// again, so it is what the live ledger gave at the close whatever node
// report is stored since.

// LedgerKey is where a ledger fact's GPU-hours count: one state on one
// GPU instance of a node (Instance -1: the whole GPU), for one project,
// owner (attributed use: the registration's) and namespace (the user's).
// Capacity, unallocated and unobserved rows have no project, owner or
// namespace.
type LedgerKey struct {
	Node, UUID string
	Instance   int64
	Model      string
	State      string
	Project    string
	Owner      string
	Namespace  string
}

// LedgerFact is one key's GPU-hours, their cost at the prices the ledger
// was computed with (Unpriced: a part of them had none), and, on a GPU's
// unobserved row, the GPU's capacity in GPU-hours.
type LedgerFact struct {
	LedgerKey
	GPUHours, Cost float64
	Unpriced       bool
	Capacity       float64
}

// LedgerFacts are a window's ledger facts in the order they were counted
// (the order their sums are added in again), with the split rule and the
// prices' currency they were computed with (Priced: with prices).
type LedgerFacts struct {
	Split    string
	Currency string
	Priced   bool
	Facts    []LedgerFact
}

// ledgerFactColumns are statement_ledger_facts' columns after month,
// version and line, in the order ledgerFactValues writes and
// scanLedgerFact reads them.
const ledgerFactColumns = `kind, day, node, uuid, gpu_instance, model, state, project, owner, namespace,
	gpu_hours, cost, unpriced, capacity_gpu_hours, split, currency, priced`

// ledgerFactBatch is how many rows one INSERT of the ledger facts writes:
// 20 arguments a row, 16,000 bound, under both engines' limits.
const ledgerFactBatch = 800

// insertLedgerFactsSQL is the INSERT of n rows of statement_ledger_facts.
func insertLedgerFactsSQL(n int) string {
	return frozenInsertSQL("statement_ledger_facts", ledgerFactNames, n)
}

var (
	stmtInsertLedgerFacts = &stmt{build: func(Dialect) string { return insertLedgerFactsSQL(2) },
		example: append(exampleLedgerFact(), exampleLedgerFact()...)}
	stmtLedgerFacts = frozenRead("statement_ledger_facts", ledgerFactColumns)
)

func exampleLedgerFact() []any {
	return append([]any{"2026-11", int64(1), int64(0)}, (&LedgerFacts{}).values(0, 0)...)
}

// rows are f's rows as stored: the month's row, then one per fact.
func (f *LedgerFacts) rows() int { return len(f.Facts) + 1 }

// values are row i's columns (i 0: the month's row).
func (f *LedgerFacts) values(i int, day int64) []any {
	if i == 0 {
		return []any{"month", day, "", "", int64(-1), "", "", "", "", "", 0.0, 0.0, int64(0), 0.0, f.Split, f.Currency, b2i(f.Priced)}
	}
	x := &f.Facts[i-1]
	return []any{"part", day, x.Node, x.UUID, x.Instance, x.Model, x.State, x.Project, x.Owner, x.Namespace,
		x.GPUHours, x.Cost, b2i(x.Unpriced), x.Capacity, "", "", int64(0)}
}

// writeLedgerFacts stores f as version's ledger rows of month, in tx,
// ledgerFactBatch rows at a time.
func (s *Store) writeLedgerFacts(ctx context.Context, tx *sql.Tx, month string, version int, f *LedgerFacts, day int64) error {
	err := s.writeBatches(ctx, tx, stmtInsertLedgerFacts, insertLedgerFactsSQL, f.rows(), ledgerFactBatch, func(i int) []any {
		return append([]any{month, version, int64(i)}, f.values(i, day)...)
	})
	if err != nil {
		return fmt.Errorf("store: close %s: ledger facts: %w", month, err)
	}
	return nil
}

// StatementLedgerFacts are the ledger facts version of month's statement
// froze, in the order they were counted; nil when it froze none (a
// statement of a store before migration 0020, or closed without a
// ledger).
func (s *Store) StatementLedgerFacts(ctx context.Context, month string, version int) (*LedgerFacts, error) {
	type row struct {
		kind string
		f    LedgerFact
		head LedgerFacts
	}
	rows, err := stmtRows(ctx, s, s.r, "statement ledger facts", stmtLedgerFacts, func(rows *sql.Rows, r *row) error {
		var day, unpriced, priced int64
		err := rows.Scan(&r.kind, &day, &r.f.Node, &r.f.UUID, &r.f.Instance, &r.f.Model, &r.f.State, &r.f.Project, &r.f.Owner,
			&r.f.Namespace, &r.f.GPUHours, &r.f.Cost, &unpriced, &r.f.Capacity, &r.head.Split, &r.head.Currency, &priced)
		r.f.Unpriced, r.head.Priced = unpriced == 1, priced == 1
		return err
	}, month, version)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	if rows[0].kind != "month" {
		return nil, fmt.Errorf("store: statement %s version %d: its ledger facts start with a row of kind %q", month, version, rows[0].kind)
	}
	out := rows[0].head
	out.Facts = make([]LedgerFact, 0, len(rows)-1)
	for _, r := range rows[1:] {
		if r.kind != "part" {
			return nil, fmt.Errorf("store: statement %s version %d: a ledger fact of kind %q", month, version, r.kind)
		}
		out.Facts = append(out.Facts, r.f)
	}
	return &out, nil
}

// ledgerFactNames are ledgerFactColumns' names, in order.
var ledgerFactNames = columnNames(ledgerFactColumns)

// JSONLines is f's canonical serialisation as a month's rows starting at
// day (Unix seconds): one JSON object a row, in the order they are
// stored, its members line then statement_ledger_facts' columns in order
// (numbers as encoding/json writes them: the shortest form that reads
// back the same). A statement's ledger_facts_sha256 is over these bytes,
// so the rows read back (StatementLedgerFacts) hash the same.
func (f *LedgerFacts) JSONLines(day int64) ([]byte, error) {
	return jsonLines(f.rows(), ledgerFactNames, func(i int) []any { return f.values(i, day) })
}
