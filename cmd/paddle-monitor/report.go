package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// reportTimeout bounds one report command (a year over millions of tasks
// takes seconds).
const reportTimeout = 10 * time.Minute

// reportCmd prints the report of a window: paddle-monitor report
// [--month YYYY-MM | --from DATE --to DATE] [--by KEYS] [--metric KEY]...
// [--prices FILE] [--format table|csv|json]; no window is the current UTC
// month, as on GET /v1/report.
// The window and keys are flags only; the database and the prices have
// their variables, as for serve.
func reportCmd(args []string, stdout io.Writer) error {
	fs := flagsOf("report", reportSettings)
	from := fs.String("from", "", "start of the window, included: RFC 3339, YYYY-MM-DD or YYYY-MM (UTC midnight); with --to, wins over --month")
	to := fs.String("to", "", "end of the window, excluded: RFC 3339, YYYY-MM-DD or YYYY-MM; with --from")
	month := fs.String("month", "", "calendar month YYYY-MM (UTC); default: the current month")
	by := fs.String("by", "project", "grouping keys, comma-separated: project, owner, priority, env, pipeline, step, task_name, hostname, node (the node a task ran on; observed use: the node that reported it), model, label:NAME (an extra label); task alone, with --format csv or json: the chargeback statement, one line per task")
	format := fs.String("format", "table", "table, csv or json")
	live := fs.Bool("live", false, "recompute a closed month from the tasks instead of serving its statement (audit)")
	metrics := fs.StringArray("metric", nil, "completion metric to show the mean of per row, over the completed tasks ending in the window that reported it (repeatable)")
	columns := fs.StringSlice("columns", nil, "table: the figure columns to show, comma-separated, names as in the JSON and CSV (key columns always come first)")
	wide := fs.Bool("wide", false, "table: show every column, however wide (default: what fits 120 columns)")
	var c reportConfig
	if err := settle(fs, args, "report", reportSettings, &c); err != nil {
		return err
	}
	db, pricesFile, budgetsFile := &c.src.db, &c.src.prices, &c.src.budgets
	var q accounts.Request
	var err error
	q.Live = *live
	q.Window, err = facts.WindowParams{From: *from, To: *to, Month: *month,
		FromName: "--from", ToName: "--to", MonthName: "--month"}.Select(time.Now())
	if err != nil {
		return badQuery(err, "")
	}
	chargeback := strings.TrimSpace(*by) == report.TaskKey
	if chargeback && *format != "csv" && *format != "json" {
		return fmt.Errorf("%w: --by task is the chargeback statement, one line per task: it takes --format csv or json", errUsage)
	}
	if chargeback {
		q.By = []string{report.TaskKey}
	} else if q.By, err = facts.ParseKeys(*by); err != nil {
		return badQuery(err, "--")
	}
	if q.Metrics, err = facts.ParseMetrics(*metrics); err != nil {
		return badQuery(err, "--")
	}
	if err := checkFormat(*format, *wide, *columns); err != nil {
		return err
	}
	var in accounts.Inputs
	if in.Prices, in.Budgets, err = loadPricing(*pricesFile, *budgetsFile); err != nil {
		return err
	}
	if in.Namespaces, err = c.nodes.namespaces(); err != nil {
		return err
	}

	ctx, st, done, err := openStore(*db, "report")
	if err != nil {
		return err
	}
	defer done()
	acc := accounts.Of(st, in)
	if chargeback {
		statement, err := acc.Chargeback(ctx, q)
		if err != nil {
			return err
		}
		if *format == "json" {
			return report.WriteChargebackJSON(stdout, statement)
		}
		return report.WriteChargebackCSV(stdout, statement)
	}
	rep, err := acc.Report(ctx, q)
	if errors.Is(err, facts.ErrBadQuery) {
		return badQuery(err, "")
	}
	if err != nil {
		return err
	}
	if *format != "table" {
		return report.Write(stdout, rep, *format)
	}
	// The names are checked against the report's own columns: cost and
	// the budget's exist only with prices and budgets.
	if err := report.CheckColumns(rep, *columns); err != nil {
		return badQuery(err, "--")
	}
	return report.WriteTableWith(stdout, rep, report.TableOptions{Columns: *columns, Wide: *wide})
}

// reportConfig is report's settings: the database, the prices, the
// budgets and the namespaces' projects (undeclared use charged to them).
type reportConfig struct {
	src   sources
	nodes nodeSettings
}

// reportSettings are report's settings from the environment too: the
// database, the prices, the budgets and --namespace-projects, as for
// serve.
var reportSettings = settings.Table[reportConfig]{Policy: settings.Refuse, Entries: slices.Concat(
	sourceEntries(func(c *reportConfig) *sources { return &c.src },
		"GPU prices file (JSON)", "monthly budgets of projects (JSON): a report by project over one calendar month shows each row's budget"),
	slices.DeleteFunc(nodeEntries(func(c *reportConfig) *nodeSettings { return &c.nodes }, false),
		func(e entry[reportConfig]) bool { return e.Flag != "namespace-projects" }))}

// badQuery is a usage error of the report's query, as report says it (its
// rule, naming the parameter after prefix) without facts.ErrBadQuery's
// own words.
func badQuery(err error, prefix string) error {
	if qe, ok := errors.AsType[*facts.QueryError](err); ok {
		return fmt.Errorf("%w: %s%s", errUsage, prefix, qe.Rule)
	}
	return fmt.Errorf("%w: %s%w", errUsage, prefix, err)
}

// mountReport adds the report's parts to a monitor: GET /v1/report, the
// page GET /, and the open tasks and the projects' month on /metrics.
func mountReport(api *monitor.API, reg *prometheus.Registry, st *store.Store, c *serveConfig,
	prices *report.Prices, budgets *report.Budgets, log *slog.Logger) error {
	monitor.MountReport(api, monitor.ReportConfig{Source: st, Prices: prices, Budgets: budgets, OpenTTL: c.openTTL, ExecTTL: c.execTTL, Log: log,
		Fleet: c.fleet, Books: st, Accounts: c.accounts})
	// The open tasks are written on /metrics directly (the same bytes as
	// the collector gathered, without a const metric per series).
	api.ServeTasks(monitor.NewTaskCollector(st, c.openTTL, nil).WithExecTTL(c.execTTL))
	projects := monitor.NewProjectCollector(st, prices, budgets, nil, log)
	projects.Accounts = c.accounts
	return reg.Register(projects)
}

// loadPricing reads the prices file and the budgets file (either may be
// ""), and checks that cost budgets have prices of their currency.
func loadPricing(pricesFile, budgetsFile string) (*report.Prices, *report.Budgets, error) {
	var prices *report.Prices
	var budgets *report.Budgets
	var err error
	if pricesFile != "" {
		if prices, err = report.LoadPrices(pricesFile); err != nil {
			return nil, nil, err
		}
	}
	if budgetsFile != "" {
		if budgets, err = report.LoadBudgets(budgetsFile, prices, pricesFile); err != nil {
			return nil, nil, err
		}
	}
	return prices, budgets, nil
}

// checkFormat checks --format and the table's column flags, as report and
// ledger take them: one of table, csv, json; --wide or --columns, not
// both, and only for the table.
func checkFormat(format string, wide bool, columns []string) error {
	switch format {
	case "table", "csv", "json":
	default:
		return fmt.Errorf("%w: --format %q: allowed: table, csv, json", errUsage, format)
	}
	if wide && len(columns) > 0 {
		return fmt.Errorf("%w: --wide and --columns: give one of them", errUsage)
	}
	if format != "table" && (wide || len(columns) > 0) {
		return fmt.Errorf("%w: --wide and --columns choose the table's columns; --format %s has every column", errUsage, format)
	}
	return nil
}
