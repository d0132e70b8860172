package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/kubereview"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// nodeSettings are the settings of node reports and the ledger (serve's,
// and the ledger commands' but --raw-retention).
type nodeSettings struct {
	retire, rawRetention time.Duration
	namespacesFile       string
	split                string
	// kubeTokenReview and serviceAccounts: the node agents' identity from
	// the cluster (serve only; docs/node.md, "Identity and trust").
	kubeTokenReview string
	serviceAccounts []string
}

// nodeEntries are the settings of node reports and the ledger, kept in the
// field field returns; withRaw adds --raw-retention (serve only).
func nodeEntries[T any](field func(*T) *nodeSettings, withRaw bool) []entry[T] {
	e := []entry[T]{
		{Flag: "node-retire", Var: "PADDLE_MONITOR_NODE_RETIRE", Type: "duration", Default: store.DefaultNodeRetire.String(),
			Doc: "a node's GPU stops counting this long after its last report, and stays its node's (409 to another) until then",
			Parse: func(c *T, s string) (err error) {
				field(c).retire, err = settings.PositiveDuration(s)
				return err
			}},
		{Flag: "namespace-projects", Var: "PADDLE_MONITOR_NAMESPACE_PROJECTS", Type: "string",
			Doc:   `namespace globs to projects (JSON {"team-a": "search_default", "*": "unassigned"}): undeclared use of a namespace is charged to its project`,
			Parse: str(func(c *T) *string { return &field(c).namespacesFile })},
		{Flag: "split", Var: "PADDLE_MONITOR_SPLIT", Type: "string", Default: ledger.SplitEqual,
			Doc: "how an instance's occupied time is split among its users: equal or util",
			Parse: func(c *T, s string) (err error) {
				field(c).split, err = settings.OneOf(s, ledger.SplitEqual, ledger.SplitUtil)
				return err
			}},
	}
	if withRaw {
		e = append(e, entry[T]{Flag: "kube-tokenreview", Var: "PADDLE_MONITOR_KUBE_TOKENREVIEW", Type: "string",
			Doc:   "verify node agents' ServiceAccount tokens with the cluster's TokenReview: in-cluster, or the path of a kubeconfig in JSON; a reviewed token reports only for its pod's node",
			Parse: str(func(c *T) *string { return &field(c).kubeTokenReview })},
			entry[T]{Flag: "node-service-account", Var: "PADDLE_MONITOR_NODE_SERVICE_ACCOUNT", Type: "list",
				Doc: "NAMESPACE/NAME of the node agents' ServiceAccount, whose reviewed tokens may send node reports (repeatable, or comma-separated: one per node pool)",
				Parse: func(c *T, s string) error {
					field(c).serviceAccounts = nil
					for _, a := range strings.Split(s, ",") {
						if a = strings.TrimSpace(a); a != "" {
							field(c).serviceAccounts = append(field(c).serviceAccounts, a)
						}
					}
					return nil
				}})
		e = append(e, entry[T]{Flag: "raw-retention", Var: "PADDLE_MONITOR_RAW_RETENTION", Type: "duration",
			Default: store.DefaultRawRetention.String(), Doc: "raw node reports are kept this long (the hourly roll-ups for good)",
			Parse: func(c *T, s string) (err error) {
				field(c).rawRetention, err = settings.PositiveDuration(s)
				return err
			}})
	}
	return e
}

// namespaces reads the --namespace-projects file (nil without one).
func (n *nodeSettings) namespaces() (*ledger.NamespaceProjects, error) {
	if n.namespacesFile == "" {
		return nil, nil
	}
	return ledger.LoadNamespaceProjects(n.namespacesFile)
}

// pruneEvery is how often serve deletes the raw node reports older than
// --raw-retention.
const pruneEvery = 10 * time.Minute

// reviewer is the TokenReview client of --kube-tokenreview (nil without).
func (n *nodeSettings) reviewer() (monitor.TokenReviewer, error) {
	if n.kubeTokenReview == "" {
		if len(n.serviceAccounts) > 0 {
			return nil, fmt.Errorf("%w: --node-service-account needs --kube-tokenreview", errUsage)
		}
		return nil, nil
	}
	api, err := kubereview.Open(n.kubeTokenReview)
	if err != nil {
		return nil, err
	}
	r, err := kubereview.New(api, n.serviceAccounts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return monitor.KubeReviewer{Reviewer: r}, nil
}

// mountNodes mounts the node-report endpoint, and prunes raw reports until
// ctx ends.
func mountNodes(ctx context.Context, api *monitor.API, st *store.Store, n *nodeSettings, log *slog.Logger) error {
	rev, err := n.reviewer()
	if err != nil {
		return err
	}
	monitor.MountNodes(api, monitor.NodesConfig{Store: st, Retire: n.retire, Reviewer: rev})
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
	return nil
}

// nodeRetireSettings: the database only.
var nodeRetireSettings = settings.Table[sources]{Policy: settings.Refuse,
	Entries: sourceEntries(func(c *sources) *sources { return c }, "", "")[:1]}

// nodeCmd is `paddle-monitor node retire NODE`: the node's GPUs stop
// counting now, and another node may report them.
func nodeCmd(args []string, stdout io.Writer) error {
	fs := flagsOf("node", nodeRetireSettings)
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
	var src sources
	if err := resolve(nodeRetireSettings, &src, fs); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, src.db, store.Options{MustExist: true})
	if errors.Is(err, store.ErrNoDatabase) {
		return fmt.Errorf("--db %s: no such database file", src.db)
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
