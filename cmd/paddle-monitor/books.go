package main

// The commands of a year of data (docs/monitor.md, "Operating it for a
// year"): backup, restore, close and statements; serve's side of them
// (--auto-close, --retain) is books_serve.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// booksCommands are the commands' usage lines, after report.
var booksCommands = []struct{ name, synopsis, summary string }{
	{"close", "close  --month YYYY-MM --as NAME [--reason TEXT] [--reopen] [--db DSN] [--prices FILE] [--budgets FILE]",
		"Close a month: store its statement (report by project and by project and owner, prices, budgets, SHA-256), recording who (--as) and why (--reason); --reopen reopens it (--reason required; the statement is kept; the next close makes a new version)."},
	{"statements", "statements [--db DSN] [--json]", "List the closed months' statements, every version, with their SHA-256 (checked against the stored body)."},
	{"backup", "backup --db FILE --to FILE", "Copy a SQLite store while it serves (VACUUM INTO), verify the copy, print its size and task count."},
	{"restore", "restore --from FILE --db FILE", "Replace a SQLite store with a verified backup; refused while a monitor serves it."},
}

func init() {
	// After report, before token.
	i := 2
	for j, c := range commands {
		if c.name == "report" {
			i = j + 1
		}
	}
	rest := append([]struct{ name, synopsis, summary string }{}, commands[i:]...)
	commands = append(append(commands[:i], booksCommands...), rest...)
}

// runBooks runs the commands of this file; ok false for another command.
func runBooks(name string, args []string, stdout io.Writer) (err error, ok bool) {
	switch name {
	case "close":
		return closeCmd(args, stdout), true
	case "statements":
		return statementsCmd(args, stdout), true
	case "backup":
		return backupCmd(args, stdout), true
	case "restore":
		return restoreCmd(args, stdout), true
	case "export":
		return exportCmd(args, stdout), true
	}
	return nil, false
}

// dbSettings are the settings of statements, backup and restore: the
// database alone, as serve takes it.
var dbSettings = settings.Table[sources]{Policy: settings.Refuse, Entries: sourceEntries(func(c *sources) *sources { return c }, "", "")[:1]}

// closeSettings are close's: the database, the prices and budgets the
// statement is computed with (and keeps), and the ledger's settings (its
// states go into the statement when node reports exist).
var closeSettings = settings.Table[ledgerConfig]{Policy: settings.Refuse, Entries: slices.Concat(
	sourceEntries(func(c *ledgerConfig) *sources { return &c.sources },
		"GPU prices file (JSON), stored in the statement", "monthly budgets (JSON), stored in the statement"),
	nodeEntries(func(c *ledgerConfig) *nodeSettings { return &c.nodes }, false),
	focusEntries(func(c *ledgerConfig) *focus.Settings { return &c.focus }))}

// openStore opens, for one command (cmd, named in the error), a store
// that must exist (never creating a SQLite file), within reportTimeout;
// done closes it and ends the deadline.
func openStore(db, cmd string) (ctx context.Context, st *store.Store, done func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	if st, err = openExisting(ctx, db, cmd); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, st, func() { st.Close(); cancel() }, nil
}

// openExisting opens a store that must exist (never creates a SQLite file).
func openExisting(ctx context.Context, db, cmd string) (*store.Store, error) {
	st, err := store.Open(ctx, db, store.Options{MustExist: true})
	if errors.Is(err, store.ErrNoDatabase) {
		return nil, fmt.Errorf("--db %s: no such database file (paddle-monitor serve creates it; %s never does)", db, cmd)
	}
	return st, err
}

func closeCmd(args []string, stdout io.Writer) error {
	fs := flagsOf("close", closeSettings)
	month := fs.String("month", "", "the month to close, YYYY-MM (UTC)")
	reopen := fs.Bool("reopen", false, "reopen the month instead (its statement is kept; the next close makes a new version); needs --reason")
	as := fs.String("as", "", "who closes or reopens (a person's name, recorded in the statements; required)")
	reason := fs.String("reason", "", "why (recorded in the statements; required with --reopen)")
	if err := parseNoArgs(fs, args, "close"); err != nil {
		return err
	}
	if *month == "" {
		return fmt.Errorf("%w: close: --month is required (YYYY-MM)", errUsage)
	}
	*as, *reason = strings.TrimSpace(*as), strings.TrimSpace(*reason)
	if *as == "" {
		return fmt.Errorf("%w: close: --as NAME is required (who closes or reopens the month, recorded in the statements)", errUsage)
	}
	if *reopen && *reason == "" {
		return fmt.Errorf("%w: close --reopen: --reason is required (why the month is reopened, recorded in the statements)", errUsage)
	}
	if len(*as) > 200 || len(*reason) > 1000 {
		return fmt.Errorf("%w: close: --as is at most 200 bytes and --reason at most 1000", errUsage)
	}
	var lc ledgerConfig
	if err := resolve(closeSettings, &lc, fs); err != nil {
		return err
	}
	db, pricesFile, budgetsFile := &lc.db, &lc.prices, &lc.budgets
	ns, err := lc.nodes.namespaces()
	if err != nil {
		return err
	}
	if _, err := facts.ParseMonth("--month", *month); err != nil {
		return badQuery(err, "")
	}
	in, err := booksInputs(*pricesFile, *budgetsFile)
	if err != nil {
		return err
	}
	ctx, st, done, err := openStore(*db, "close")
	if err != nil {
		return err
	}
	defer done()
	in.Ledger = accounts.Of(st, accounts.Inputs{Prices: in.Prices, Budgets: in.Budgets, Namespaces: ns, Split: lc.nodes.split,
		Retire: lc.nodes.retire}).StatementLedger()
	if err := withNamespaces(&in, ns, lc.nodes.namespacesFile); err != nil {
		return err
	}
	if !*reopen {
		// A month already closed answers its statement whatever the inputs.
		closed, err := st.Statement(ctx, *month)
		if err != nil {
			return err
		}
		if closed == nil {
			if err := checkServingInputs(ctx, st, servingInputs(in, lc.nodes.split)); err != nil {
				return err
			}
		}
	}
	by := *as
	if *reopen {
		if _, err := facts.ParseMonth("--month", *month); err != nil {
			return badQuery(err, "")
		}
		c, err := st.ReopenMonthBecause(ctx, *month, by, *reason)
		if err != nil {
			return err
		}
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn("month reopened", "month", c.Month, "version", c.Version, "by", by, "reason", *reason, "sha256", c.SHA256)
		_, err = fmt.Fprintf(stdout, "%s reopened: version %d (sha256 %s) is kept; the next close makes version %d\n", c.Month, c.Version, c.SHA256, c.Version+1)
		return err
	}
	c, created, err := books.Close(ctx, st, *month, by, in, time.Now())
	if errors.Is(err, books.ErrNotOver) {
		return fmt.Errorf("%w: --month: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	state := "closed"
	if !created {
		state = "already closed"
	} else {
		if *reason != "" {
			if err := st.SetCloseReason(ctx, c.Month, c.Version, *reason); err != nil {
				return err
			}
		}
		if err := storeFocusExports(ctx, st, lc, lc.focus, in, c); err != nil {
			return fmt.Errorf("%s is closed (version %d), but its FOCUS export was not kept: %w (its first export keeps one)", c.Month, c.Version, err)
		}
	}
	_, err = fmt.Fprintf(stdout, "%s %s: version %d, closed at %s, sha256 %s\n", c.Month, state, c.Version, c.ClosedAt.Format(time.RFC3339), c.SHA256)
	return err
}

// booksInputs reads the prices and budgets files for a statement: parsed,
// and as they are (the statement keeps them).
func booksInputs(pricesFile, budgetsFile string) (books.Inputs, error) {
	var in books.Inputs
	var err error
	if in.Prices, in.Budgets, err = loadPricing(pricesFile, budgetsFile); err != nil {
		return in, err
	}
	if pricesFile != "" {
		if in.PricesJSON, err = os.ReadFile(pricesFile); err != nil {
			return in, err
		}
	}
	if budgetsFile != "" {
		if in.BudgetsJSON, err = os.ReadFile(budgetsFile); err != nil {
			return in, err
		}
	}
	return in, nil
}

// withNamespaces gives a close the --namespace-projects mapping (ns, read
// from file) the report bills undeclared use with, so the statement bills
// it too (before, a statement dropped it: 1 GPU-hour against the live
// report's 2).
func withNamespaces(in *books.Inputs, ns *ledger.NamespaceProjects, file string) error {
	if ns == nil {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--namespace-projects: %w", err)
	}
	in.Namespaces, in.NamespacesJSON = ns.Project, b
	return nil
}

func statementsCmd(args []string, stdout io.Writer) error {
	fs := flagsOf("statements", dbSettings)
	asJSON := fs.Bool("json", false, "one JSON object per version, with its body (the canonical JSON its hash is of)")
	var src sources
	if err := settle(fs, args, "statements", dbSettings, &src); err != nil {
		return err
	}
	db := &src.db
	ctx, st, done, err := openStore(*db, "statements")
	if err != nil {
		return err
	}
	defer done()
	all, err := st.Statements(ctx)
	if err != nil {
		return err
	}
	notes, err := st.StatementNotes(ctx)
	if err != nil {
		return err
	}
	var bad []string
	for _, c := range all {
		body, err := st.StatementBody(ctx, c.Month, c.Version)
		if err != nil {
			return err
		}
		if books.Hash(body) != c.SHA256 {
			bad = append(bad, fmt.Sprintf("%s version %d", c.Month, c.Version))
		} else if ok, err := books.FactsMatch(ctx, st, c.Month, c.Version); err != nil {
			return err
		} else if !ok {
			bad = append(bad, fmt.Sprintf("%s version %d (its task or ledger facts)", c.Month, c.Version))
		}
		n := notes[store.NotesKey(c.Month, c.Version)]
		if *asJSON {
			b, err := json.Marshal(struct {
				monitor.Statement
				Body json.RawMessage `json:"body"`
			}{monitor.Statement{Month: c.Month, Version: c.Version, ClosedAt: c.ClosedAt, ClosedBy: c.ClosedBy, ReopenedAt: c.ReopenedAt,
				ReopenedBy: c.ReopenedBy, CloseReason: n.CloseReason, ReopenReason: n.ReopenReason, SHA256: c.SHA256, InForce: c.ReopenedAt == nil},
				json.RawMessage(body)})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\n", b)
			continue
		}
		state := "in force"
		if c.ReopenedAt != nil {
			state = "reopened " + c.ReopenedAt.Format(time.RFC3339) + " by " + c.ReopenedBy + because(n.ReopenReason)
		}
		fmt.Fprintf(stdout, "%s  version %d  closed %s by %s%s  sha256 %s  %s\n", c.Month, c.Version, c.ClosedAt.Format(time.RFC3339), c.ClosedBy,
			because(n.CloseReason), c.SHA256, state)
	}
	if len(all) == 0 && !*asJSON {
		fmt.Fprintln(stdout, "no month is closed")
	}
	if len(bad) > 0 {
		return fmt.Errorf("statements whose body does not match their sha256: %s", strings.Join(bad, ", "))
	}
	return nil
}

// backupArgs parses the arguments of backup or restore (cmd): the
// database's settings and the backup file's flag (required); a PostgreSQL
// --db is a usage error naming tool, PostgreSQL's own tool for it.
func backupArgs(cmd, flag, doc, tool string, args []string) (db, file string, err error) {
	fs := flagsOf(cmd, dbSettings)
	path := fs.String(flag, "", doc)
	if err := parseNoArgs(fs, args, cmd); err != nil {
		return "", "", err
	}
	if *path == "" {
		return "", "", fmt.Errorf("%w: %s: --%s is required", errUsage, cmd, flag)
	}
	var src sources
	if err := resolve(dbSettings, &src, fs); err != nil {
		return "", "", err
	}
	if store.IsPostgresDSN(src.db) {
		return "", "", fmt.Errorf("%w: %s: --db is a PostgreSQL URL: use %s (docs/monitor.md, \"Backups\")", errUsage, cmd, tool)
	}
	return src.db, *path, nil
}

func backupCmd(args []string, stdout io.Writer) error {
	db, to, err := backupArgs("backup", "to", "the backup file to write (must not exist)", "pg_dump", args)
	if err != nil {
		return err
	}
	start := time.Now()
	info, err := store.Backup(context.Background(), db, to)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "backup %s: %d bytes, %d tasks, %d statements, schema version %d, integrity ok (%.1fs)\n",
		info.Path, info.Bytes, info.Tasks, info.Statements, info.SchemaVersion, time.Since(start).Seconds())
	return err
}

func restoreCmd(args []string, stdout io.Writer) error {
	db, from, err := backupArgs("restore", "from", "the backup file", "pg_restore", args)
	if err != nil {
		return err
	}
	info, aside, err := store.Restore(context.Background(), from, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s from %s: %d tasks, %d statements, schema version %d\n", db, from, info.Tasks, info.Statements, info.SchemaVersion)
	if aside != "" {
		fmt.Fprintf(stdout, "the database it replaced is kept as %s\n", aside)
	}
	return nil
}
