// Package nodeagent is paddle-node: the platform's own witness on a GPU
// node (docs/node.md). It samples the GPUs through the probe child
// (probestream), tells who owns each GPU process from the kernel
// (cgroupowner), reads what containers declared through their own roots
// (containerroot), asks the kubelet and the runtime which containers were
// allocated which devices (allocation sources), builds one report per
// interval (nodereport) and delivers it through its own spool
// (reportqueue).
//
// Guarantees: reports tile time on wall-clock multiples of --interval; a
// report is spooled before it is sent; SIGTERM closes the current interval
// at that instant, spools it and sends what it can within 10 s; exit codes
// are 0 (signalled), 64 (usage, naming the flag) and 1 (start-up error,
// naming the file).
package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/probestream"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/program"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/cgroupowner"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/nodereport"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/reportqueue"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 64
)

// prog is the node agent as the programs' shared shell sees it: usage
// errors exit ExitUsage (64, docs/node.md), its version line, its logger
// (text, a "logger" field).
func prog(version string) program.Program {
	return program.Program{Name: "paddle-node", Version: version, UsageExit: ExitUsage, Log: logging.Style{Name: "paddle-node"}}
}

// finalBudget is how long the agent may take to send after SIGTERM.
const finalBudget = 10 * time.Second

// Main runs the program with its arguments (without the program name).
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer, version string) int {
	mode := "run"
	if len(args) > 0 {
		switch args[0] {
		case "version":
			prog(version).PrintVersion(stdout)
			return ExitOK
		case "once":
			mode, args = "once", args[1:]
		case "final":
			mode, args = "final", args[1:]
		case "run":
			args = args[1:]
		}
	}
	// `final` only leaves a mark beside the spool: like `once` it needs no
	// monitor and no interval (docs/node.md gives it as
	// `paddle-node final --report-spool FILE`).
	cfg, err := parse(args, getenv, mode == "once" || mode == "final")
	if errors.Is(err, errHelp) {
		usage(stdout)
		return ExitOK
	}
	if err != nil {
		return prog(version).Usage(stderr, err, "Run paddle-node --help for the settings.")
	}
	if mode == "final" {
		// The preStop hook's way to say the node is going away: a process
		// of its own cannot change the agent's environment, so it leaves
		// a mark beside the report spool that the agent reads at SIGTERM.
		if err := os.WriteFile(finalMark(cfg.ReportSpool), []byte("final\n"), 0o600); err != nil {
			fmt.Fprintf(stderr, "paddle-node: final: %v\n", err)
			return ExitError
		}
		return ExitOK
	}
	log, _ := prog(version).Logger(stderr, slog.LevelInfo, "text")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	a, err := newAgent(cfg, log, version, mode == "once")
	if err != nil {
		fmt.Fprintf(stderr, "paddle-node: %v\n", err)
		return ExitError
	}
	defer a.close()
	if mode == "once" {
		r := a.once(ctx)
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return ExitOK
	}
	if err := a.run(ctx); err != nil {
		fmt.Fprintf(stderr, "paddle-node: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// finalMark is the file `paddle-node final` leaves beside the report spool.
func finalMark(spool string) string { return filepath.Join(filepath.Dir(spool), "final") }

// agent is one running paddle-node.
type agent struct {
	cfg     Config
	log     *slog.Logger
	version string
	obs     *observer
	sources []*cachedSource
	grants  *grantSource // the kubelet source's DRA and HAMi completion (dra.go); nil off Kubernetes
	// grantsErr: an unusable --kubeconfig, a start-up error.
	grantsErr error
	child     *probestream.Child
	queue     *reportqueue.Queue
	sender    *reportqueue.Sender
	metrics   *metrics
	drainer   *drain.Drainer // --drain-spools; nil when off
	dropped   int            // reports dropped by age, as the spool last counted

	criFailing int // samples in a row without CRI's answer

	mu          sync.Mutex
	lastSuccess time.Time
	lastErr     string
	conflicts   []string // the GPU UUID conflicts of the last report answered 409

	failingSince time.Time // the first pass that could not deliver, since the last that did
	passConflict bool      // a 409 in the current pass
}

func newAgent(cfg Config, log *slog.Logger, version string, once bool) (*agent, error) {
	a := &agent{cfg: cfg, log: log, version: version, metrics: newMetrics(cfg.NodeName)}
	var err error
	if a.obs, err = newObserver(log, cfg.Proc, cfg.LabelsPath, cgroupowner.Table{KubeletRoot: cfg.KubeletCgroupRoot}); err != nil {
		return nil, fmt.Errorf("--proc %s: %w", cfg.Proc, err)
	}
	a.child = &probestream.Child{Path: cfg.Probe, Sample: cfg.Sample, Proc: cfg.Proc, Log: log}
	a.metrics.probeRestarts(func() float64 { return float64(a.child.Restarts()) })
	a.sources = a.allocationSources()
	if a.grantsErr != nil {
		return nil, a.grantsErr
	}
	if once {
		return a, nil
	}
	if a.sender, err = reportqueue.NewSender(cfg.MonitorURL, cfg.TokenFile, cfg.CAFile, "paddle-node/"+version, log); err != nil {
		return nil, err
	}
	a.sender.OnConflict = a.noteConflict
	if a.queue, err = reportqueue.Open(cfg.ReportSpool, cfg.MaxReportAge, log); err != nil {
		return nil, fmt.Errorf("--report-spool: %w", err)
	}
	if st, err := a.queue.Stats(context.Background()); err == nil {
		a.dropped = st.Dropped // counted by an earlier run
	}
	if cfg.DrainSpools != "" {
		if a.drainer, err = a.newDrainer(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *agent) close() {
	if a.queue != nil {
		a.queue.Close()
	}
	for _, s := range a.sources {
		if c, ok := s.src.(io.Closer); ok {
			c.Close()
		}
	}
}

// sample polls the allocation sources and observes one line.
func (a *agent) sample(ctx context.Context, line *probestream.Line) nodereport.Observation {
	var snap Snapshot
	if a.grants != nil {
		a.grants.setLine(line)
	}
	for _, s := range a.sources {
		sn := s.snapshot(ctx)
		snap.Containers = append(snap.Containers, sn.Containers...)
		snap.Allocations = append(snap.Allocations, sn.Allocations...)
	}
	a.obs.setSnapshot(snap)
	a.obs.cri = a.criCheck()
	obs := a.obs.observe(line)
	a.metrics.setUsers(obs)
	return obs
}

func (a *agent) noteEvent(e probestream.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.Line != nil {
		a.lastSuccess = time.Now()
		a.metrics.samples.Inc()
		return
	}
	a.lastErr = e.Err
	a.metrics.failed.Add(float64(e.Failed))
}

// once observes for one interval (or one sample) and returns the report.
func (a *agent) once(ctx context.Context) wire.NodeReport {
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan probestream.Event)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		a.child.Run(ctx, events)
	}()
	// The probe is stopped and waited for before the report is returned:
	// what it wrote on stderr (what the driver lacks) is logged before the
	// program prints the report and exits, not lost with a copy still in
	// flight (the stop is bounded: probestream kills after a second).
	defer func() {
		cancel()
		<-probed
	}()
	start := time.Now()
	b := nodereport.New(a.cfg.NodeName, a.version, start)
	var deadline <-chan time.Time
	if a.cfg.Interval > 0 {
		deadline = time.After(a.cfg.Interval)
	}
	// With --interval 0, one sample (or the first failure's lost samples).
	limit := time.After(a.cfg.Interval + 2*a.cfg.Sample + 5*time.Second)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-limit:
			break loop
		case e := <-events:
			a.noteEvent(e)
			if e.Line != nil {
				b.Add(a.sample(ctx, e.Line))
			}
			if a.cfg.Interval == 0 {
				break loop
			}
		}
	}
	end := time.Now()
	endSec := end.Truncate(time.Second)
	if endSec.Before(end) {
		endSec = endSec.Add(time.Second)
	}
	r := b.Report(endSec, false)
	r.IntervalSeconds = max(1, endSec.Unix()-start.Unix())
	return r
}

// run samples and reports until ctx ends (SIGTERM, SIGINT).
func (a *agent) run(ctx context.Context) error {
	probeCtx, stopProbe := context.WithCancel(context.Background())
	defer stopProbe()
	events := make(chan probestream.Event)
	go a.child.Run(probeCtx, events)
	if a.cfg.Listen != "" {
		srv, err := a.serve()
		if err != nil {
			return fmt.Errorf("--listen %s: %w", a.cfg.Listen, err)
		}
		defer srv.Close()
	}
	now := time.Now()
	last, have := a.queue.Last()
	start := nodereport.FirstStart(now, a.cfg.Interval, time.Unix(last, 0), have)
	b := nodereport.New(a.cfg.NodeName, a.version, start)
	a.log.Info("paddle-node started", "node", a.cfg.NodeName, "interval", a.cfg.Interval, "sample", a.cfg.Sample, "from", start.UTC().Format(time.RFC3339), "version", a.version)

	kick := make(chan struct{}, 1)
	deliverCtx, stopDeliver := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.deliverLoop(deliverCtx, kick)
	}()
	a.updateSpoolMetrics()
	select { // reports left from a previous run
	case kick <- struct{}{}:
	default:
	}

	end := nodereport.NextEnd(now, a.cfg.Interval)
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	closeAt := func(at time.Time, final bool) {
		r := b.Report(at, final)
		a.obs.newInterval()
		b.Reset(at)
		if r.IntervalSeconds <= 0 {
			return
		}
		body, err := json.Marshal(r)
		if err != nil {
			a.log.Error("report not encoded", "error", err)
			return
		}
		if err := a.queue.Put(context.Background(), r.Time, body, a.sender.Fingerprint()); err != nil {
			a.log.Error("report not spooled", "time", r.Time, "error", err)
			return
		}
		a.metrics.spooled.Inc()
		a.updateSpoolMetrics()
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	for {
		select {
		case <-ctx.Done():
			at := time.Now().Truncate(time.Second)
			stopDeliver()
			wg.Wait()
			stopProbe()
			if !at.Before(end) { // an end the timer had not told yet
				closeAt(end, false)
			}
			final := a.cfg.Final
			if _, err := os.Stat(finalMark(a.cfg.ReportSpool)); err == nil {
				final = true
				os.Remove(finalMark(a.cfg.ReportSpool))
			}
			if at.After(b.Start()) {
				closeAt(at, final)
			} else if final {
				a.log.Warn("final report not sent: the interval had just ended", "time", at.Unix())
			}
			dctx, cancel := context.WithTimeout(context.Background(), finalBudget)
			defer cancel()
			a.deliver(dctx)
			a.log.Info("paddle-node stopped", "final", final)
			return nil
		case <-timer.C:
			closeAt(end, false)
			end = end.Add(a.cfg.Interval)
			timer.Reset(time.Until(end))
		case e := <-events:
			a.noteEvent(e)
			if e.Line == nil {
				continue
			}
			if !time.Now().Before(end) { // the interval ended; close it first
				closeAt(end, false)
				end = nodereport.NextEnd(time.Now(), a.cfg.Interval)
				timer.Reset(time.Until(end))
			}
			b.Add(a.sample(ctx, e.Line))
		}
	}
}

// deliverLoop sends the spool whenever kicked, and at least every interval.
func (a *agent) deliverLoop(ctx context.Context, kick <-chan struct{}) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.Interval/2)
		a.deliver(pctx)
		if a.drainer != nil {
			a.drainPass(pctx)
		}
		cancel()
	}
}

func (a *agent) deliver(ctx context.Context) {
	a.mu.Lock()
	a.passConflict = false
	a.mu.Unlock()
	res, err := reportqueue.Deliver(ctx, a.queue, a.sender)
	a.metrics.sent.Add(float64(res.Sent))
	a.metrics.dead.Add(float64(res.Dead))
	if err != nil {
		a.log.Error("report spool", "file", a.cfg.ReportSpool, "error", err)
	}
	if res.Dead > 0 {
		a.log.Error("reports refused by the monitor, moved to the dead letters", "count", res.Dead)
	}
	a.mu.Lock()
	if res.Sent > 0 && !a.passConflict {
		a.conflicts = nil // the monitor took a report without a conflict
	}
	a.mu.Unlock()
	a.noteOutage(res)
	if res.Stopped != nil {
		attrs := []any{"answer", a.sender.Client.Redact(res.Stopped.Error())}
		if !res.Waiting.IsZero() {
			attrs = append(attrs, "retry_after", res.Waiting.UTC().Format(time.RFC3339))
		}
		a.log.Warn("reports kept for the next pass", attrs...)
	}
	a.updateSpoolMetrics()
}

// noteOutage logs, at info, one line when delivery resumes after passes
// that delivered nothing: how many reports went, after how long.
func (a *agent) noteOutage(res reportqueue.PassResult) {
	now := time.Now()
	switch {
	case res.Sent > 0 && !a.failingSince.IsZero():
		a.log.Info("report delivery resumed", "reports", res.Sent, "failing_for", now.Sub(a.failingSince).Round(time.Second).String(), "since", a.failingSince.UTC().Format(time.RFC3339))
		a.failingSince = time.Time{}
		if res.Stopped != nil {
			a.failingSince = now
		}
	case res.Sent == 0 && res.Stopped != nil && a.failingSince.IsZero():
		a.failingSince = now
	}
}

// noteConflict counts and logs a 409: the monitor stored the report, but
// another node holds some of its GPU UUIDs; /healthz names them.
func (a *agent) noteConflict(report string, conflicts []string) {
	a.metrics.conflicts.Inc()
	a.log.Warn("the monitor stored a report with GPU UUID conflicts: another node reports these GPUs; their use counts in no state until paddle-monitor node retire resolves it",
		"report", report, "conflicts", strings.Join(conflicts, ", "))
	a.mu.Lock()
	a.conflicts = conflicts
	a.passConflict = true
	a.mu.Unlock()
}

func (a *agent) updateSpoolMetrics() {
	st, err := a.queue.Stats(context.Background())
	if err != nil {
		return
	}
	if st.Dropped > a.dropped {
		a.log.Warn("reports older than --max-report-age dropped", "count", st.Dropped-a.dropped)
		a.metrics.dropped.Add(float64(st.Dropped - a.dropped))
	}
	a.dropped = st.Dropped
	a.metrics.pending.Set(float64(st.Pending))
	a.metrics.deadNow.Set(float64(st.Dead))
	if st.Oldest.IsZero() {
		a.metrics.oldest.Set(0)
	} else {
		a.metrics.oldest.Set(time.Since(st.Oldest).Seconds())
	}
}
