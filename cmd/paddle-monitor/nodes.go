package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/wire"
)

// nodeSettings are serve's settings of node reports and the ledger.
type nodeSettings struct {
	retire, rawRetention time.Duration
	namespaces           *ledger.NamespaceProjects
	split                string
}

// nodeFlags defines serve's flags of node reports on e's flag set.
func nodeFlags(e env) (func() (*nodeSettings, error), error) {
	retire, err := e.duration("node-retire", "PADDLE_MONITOR_NODE_RETIRE", store.DefaultNodeRetire,
		"a node's GPU stops counting this long after its last report, and stays its node's (409 to another) until then")
	if err != nil {
		return nil, err
	}
	raw, err := e.duration("raw-retention", "PADDLE_MONITOR_RAW_RETENTION", store.DefaultRawRetention,
		"raw node reports are kept this long (the hourly roll-ups for good)")
	if err != nil {
		return nil, err
	}
	lf, err := defineLedgerFlags(e)
	if err != nil {
		return nil, err
	}
	return func() (*nodeSettings, error) {
		ns, err := lf.load()
		if err != nil {
			return nil, err
		}
		if *retire <= 0 {
			return nil, fmt.Errorf("%w: --node-retire must be positive", errUsage)
		}
		if *raw <= 0 {
			return nil, fmt.Errorf("%w: --raw-retention must be positive", errUsage)
		}
		return &nodeSettings{retire: *retire, rawRetention: *raw, namespaces: ns, split: *lf.split}, nil
	}, nil
}

// pruneEvery is how often serve deletes the raw node reports older than
// --raw-retention.
const pruneEvery = 10 * time.Minute

// mountNodes mounts the node-report endpoint, and prunes raw reports until
// ctx ends.
func mountNodes(ctx context.Context, api *monitor.API, st *store.Store, n *nodeSettings, log *slog.Logger) {
	monitor.MountNodes(api, monitor.NodesConfig{Store: st, Retire: n.retire})
	go func() {
		t := time.NewTicker(pruneEvery)
		defer t.Stop()
		for {
			k, err := st.PruneNodeReports(ctx, time.Now().Add(-n.rawRetention).Unix())
			switch {
			case err != nil && ctx.Err() == nil:
				log.Error("pruning raw node reports failed", "err", err)
			case k > 0:
				log.Info("raw node reports pruned", "deleted", k, "raw_retention", n.rawRetention.String())
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// nodeCmd is `paddle-monitor node retire NODE`: the node's GPUs stop
// counting now, and another node may report them.
func nodeCmd(args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e := env{fs}
	db, err := e.secret("db", "PADDLE_MONITOR_DB", "paddle-monitor.db", "SQLite file, or postgres:// URL")
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 || fs.Arg(0) != "retire" {
		return fmt.Errorf("%w: node takes: retire NODE", errUsage)
	}
	node := fs.Arg(1)
	if err := wire.HostName(node); err != nil {
		return fmt.Errorf("%w: node retire: NODE %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, *db, store.Options{MustExist: true})
	if errors.Is(err, store.ErrNoDatabase) {
		return fmt.Errorf("--db %s: no such database file", *db)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := st.RetireNode(ctx, node, time.Now().Unix())
	if errors.Is(err, store.ErrUnknownNode) {
		return fmt.Errorf("node retire: no report of node %s is stored", node)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "node %s retired: %d GPUs no longer count\n", node, n)
	return err
}
