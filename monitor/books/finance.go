package books

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// KeptExports keeps a closed statement's files (a *store.Store): the FOCUS
// export and the chargeback lines, each under its format.
type KeptExports interface {
	StatementExport(ctx context.Context, month string, version int, format string) (body []byte, sha string, ok bool, err error)
	PutStatementExport(ctx context.Context, month string, version int, format string, body []byte, sha string) ([]byte, string, error)
}

// keptChargeback is the format under which a statement keeps its
// chargeback lines (the whole month, every project, as JSON).
const keptChargeback = "chargeback-lines.json"

// KeepChargeback computes the chargeback lines of month (every project:
// q.Scope is not used) and keeps them with statement version unless some
// are kept already; it returns the lines kept. A closed month's chargeback
// is these lines from then on (invariant 3: a late task of the month is
// billed once, as the next month's adjustment, never in these lines).
func KeepChargeback(ctx context.Context, ks KeptExports, src report.TaskLister, q report.Query, month string, version int) (*report.Statement, error) {
	body, _, ok, err := ks.StatementExport(ctx, month, version, keptChargeback)
	if err != nil {
		return nil, err
	}
	if !ok {
		whole := q
		whole.Scope = nil
		st, err := report.Chargeback(ctx, src, whole)
		if err != nil {
			return nil, err
		}
		if body, err = json.Marshal(st); err != nil {
			return nil, fmt.Errorf("books: chargeback of %s: %w", month, err)
		}
		sum := sha256.Sum256(body)
		if body, _, err = ks.PutStatementExport(ctx, month, version, keptChargeback, body, hex.EncodeToString(sum[:])); err != nil {
			return nil, err
		}
	}
	var st report.Statement
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("books: the kept chargeback of %s version %d does not read: %w", month, version, err)
	}
	return &st, nil
}

// Chargeback is the chargeback statement of q's window with the hash of
// its statement: a whole closed month's is the lines its statement kept
// (kept now, when the month was closed before statements kept them),
// filtered to q.Scope; any other window's is computed from the tasks now.
func Chargeback(ctx context.Context, st Store, src report.TaskLister, q report.Query) (*report.Statement, error) {
	ks, keeps := st.(KeptExports)
	if st == nil || !q.Window.IsMonth() {
		return report.Chargeback(ctx, src, q)
	}
	month := q.From.Format("2006-01")
	c, err := st.Statement(ctx, month)
	if err != nil {
		return nil, err
	}
	if c == nil || !keeps {
		out, err := report.Chargeback(ctx, src, q)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out.SHA256 = c.SHA256
			return out, nil
		}
		// An open month lists the late tasks of closed months it carries.
		adj, err := Adjustments(ctx, st, q)
		if err != nil {
			return nil, err
		}
		out.Adjustments = forReader(adj, q)
		return out, nil
	}
	kept, err := KeepChargeback(ctx, ks, src, q, month, c.Version)
	if err != nil {
		return nil, err
	}
	out := &report.Statement{From: kept.From, To: kept.To, Currency: kept.Currency, SHA256: c.SHA256}
	labels := map[string]bool{}
	for _, l := range kept.Lines {
		if q.Scope != nil && !q.Scope(l.Project, l.Owner) {
			continue
		}
		out.Lines = append(out.Lines, l)
		for k := range l.Labels {
			labels[k] = true
		}
	}
	out.Labels = slices.Sorted(maps.Keys(labels))
	// The late data of earlier months the statement counted: the lines
	// the month showed while open (invariant 3), from what it froze.
	adj, err := carried(ctx, st, c, q)
	if err != nil {
		return nil, err
	}
	if len(adj) > 0 {
		out.Adjustments = adj
	}
	return out, nil
}
