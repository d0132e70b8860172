package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// ledgerFlags are the flags the ledger's answers share (serve, ledger,
// discrepancies): the namespace-projects file, the split rule and
// --node-retire.
type ledgerFlags struct {
	namespaces, split *string
	retire            *time.Duration
}

func defineLedgerFlags(e env) (*ledgerFlags, error) {
	f := &ledgerFlags{}
	f.namespaces = e.str("namespace-projects", "PADDLE_MONITOR_NAMESPACE_PROJECTS", "",
		`namespace globs to projects (JSON {"team-a": "search_default", "*": "unassigned"}): undeclared use of a namespace is charged to its project`)
	f.split = e.str("split", "PADDLE_MONITOR_SPLIT", ledger.SplitEqual, "how an instance's occupied time is split among its users: equal or util")
	return f, nil
}

// load reads the namespace-projects file and checks --split.
func (f *ledgerFlags) load() (*ledger.NamespaceProjects, error) {
	if *f.split != ledger.SplitEqual && *f.split != ledger.SplitUtil {
		return nil, fmt.Errorf("%w: --split %q: must be equal or util", errUsage, *f.split)
	}
	if *f.namespaces == "" {
		return nil, nil
	}
	return ledger.LoadNamespaceProjects(*f.namespaces)
}

// mountLedger adds GET /v1/ledger and GET /v1/discrepancies.
func mountLedger(api *monitor.API, st *store.Store, c *serveConfig, prices *report.Prices) {
	monitor.MountLedger(api, monitor.LedgerConfig{Source: st, Prices: prices, Namespaces: c.nodes.namespaces, Split: c.nodes.split,
		Retire: c.nodes.retire})
}

// ledgerCmd is `paddle-monitor ledger` and `paddle-monitor discrepancies`.
func ledgerCmd(name string, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e := env{fs}
	db, err := e.secret("db", "PADDLE_MONITOR_DB", "paddle-monitor.db", "SQLite file, or postgres:// URL")
	if err != nil {
		return err
	}
	pricesFile := e.str("prices", "PADDLE_MONITOR_PRICES", "", "GPU prices file (JSON)")
	lf, err := defineLedgerFlags(e)
	if err != nil {
		return err
	}
	retire, err := e.duration("node-retire", "PADDLE_MONITOR_NODE_RETIRE", store.DefaultNodeRetire,
		"a node's GPU stops counting this long after its last report")
	if err != nil {
		return err
	}
	from := fs.String("from", "", "start of the window, included (a whole hour): RFC 3339, YYYY-MM-DD or YYYY-MM; with --to, wins over --month")
	to := fs.String("to", "", "end of the window, excluded (a whole hour); with --from")
	month := fs.String("month", "", "calendar month YYYY-MM (UTC); default: the current month")
	var by, format *string
	if name == "ledger" {
		by = fs.String("by", ledger.ByNode, "node, model, project, namespace or state")
		format = fs.String("format", "table", "table, csv or json")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, name, fs.Args())
	}
	ns, err := lf.load()
	if err != nil {
		return err
	}
	q := ledger.Query{By: ledger.ByNode, Split: *lf.split, Namespaces: ns, Retire: *retire, Now: time.Now()}
	if by != nil {
		q.By = *by
	}
	q.Window, err = report.WindowParams{From: *from, To: *to, Month: *month, FromName: "--from", ToName: "--to", MonthName: "--month"}.Select(q.Now)
	if err != nil {
		return badQuery(err, "")
	}
	if err := q.Check(); err != nil {
		return fmt.Errorf("%w: %s", errUsage, strings.TrimPrefix(err.Error(), ledger.ErrBadQuery.Error()+": "))
	}
	if format != nil {
		switch *format {
		case "table", "csv", "json":
		default:
			return fmt.Errorf("%w: --format %q: must be table, csv or json", errUsage, *format)
		}
	}
	if q.Prices, _, err = loadPricing(*pricesFile, ""); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	st, err := store.Open(ctx, *db, store.Options{MustExist: true})
	if errors.Is(err, store.ErrNoDatabase) {
		return fmt.Errorf("--db %s: no such database file (paddle-monitor serve creates it; %s never does)", *db, name)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if name == "discrepancies" {
		d, err := ledger.FindDiscrepancies(ctx, st, q)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	l, err := ledger.Compute(ctx, st, q)
	if err != nil {
		return err
	}
	return ledger.Write(stdout, l, *format)
}
