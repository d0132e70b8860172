package register

import (
	"context"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
)

// AlongsideRetry is the wait between registration attempts made while the
// command runs (supervise mode): nothing waits for them, so the waits grow
// to a minute and the monitor is not hammered during a long outage.
var AlongsideRetry = deliver.RetryPolicy{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.3}

// alongsideHold is how long a registration running alongside the command
// keeps its write-ahead entry from other processes; it is renewed after
// every failed attempt (at most AlongsideRetry.Max apart) and released
// when the registration stops trying, so an entry of a supervisor that was
// killed is anyone's again within it.
const alongsideHold = 3 * time.Minute

// Backlog drain while the command runs: a few older entries at a time, at
// a low rate, so a node's backlog drains without a burst.
const (
	drainBatch = 5
	drainEvery = 30 * time.Second
)

// Alongside is a registration running alongside the command (supervise
// mode). It is written to the spool before its first attempt (write-ahead:
// a container killed at any moment loses nothing), retried with
// AlongsideRetry (one attempt in flight, no budget) until it is delivered,
// refused for good, or finished; then older spool entries are drained at a
// low rate by drain, until Finish.
type Alongside struct {
	r        *Registrar
	taskID   string
	body     []byte
	drain    func(context.Context) (more bool)
	cancel   context.CancelFunc
	hurry    chan struct{} // closed by Finish: try now, then stop
	ahead    chan struct{} // closed once the write-ahead to the spool is done
	resolved chan struct{} // closed once out is final
	once     sync.Once
	// The backlog drain: StopDrain sets noDrain (under mu) and waits for
	// drained when a drain was running.
	mu               sync.Mutex
	noDrain, inDrain bool
	stopDrain        chan struct{} // closed by StopDrain
	drained          chan struct{} // closed when a started drain has ended
	out              Outcome
}

// RegisterAlongside starts registering taskID in the background. drain,
// when not nil, sends a few older spool entries and reports whether more
// are left; it runs after the registration was delivered.
func (r *Registrar) RegisterAlongside(ctx context.Context, taskID string, body []byte, drain func(context.Context) bool) *Alongside {
	ctx, cancel := context.WithCancel(ctx)
	a := &Alongside{r: r, taskID: taskID, body: body, drain: drain, cancel: cancel,
		hurry: make(chan struct{}), ahead: make(chan struct{}), resolved: make(chan struct{}),
		stopDrain: make(chan struct{}), drained: make(chan struct{})}
	go a.run(ctx)
	return a
}

// Finish makes a registration still pending try once more at once, and
// waits for its outcome until ctx is done; then the background work stops.
func (a *Alongside) Finish(ctx context.Context) Outcome {
	a.once.Do(func() { close(a.hurry) })
	defer a.cancel()
	select {
	case <-a.resolved:
		return a.out
	case <-ctx.Done():
		return Spooled
	}
}

func (a *Alongside) resolve(out Outcome) {
	a.out = out
	close(a.resolved)
}

// WaitWriteAhead waits, until ctx is done, for the registration's
// write-ahead to the spool, which runs alongside the command's start: the
// supervisor calls it before spooling the completion, so that a supervisor
// killed after that never leaves a completion without its registration (a
// command that ends at once may end before the write-ahead).
func (a *Alongside) WaitWriteAhead(ctx context.Context) {
	select {
	case <-a.ahead:
	case <-ctx.Done():
	}
}

// StopDrain ends the backlog drain and waits, until ctx is done, for a
// pass in progress to end: the supervisor calls it before spooling its own
// completion, which a drain pass must not send a second time. The
// registration itself goes on until Finish.
func (a *Alongside) StopDrain(ctx context.Context) {
	a.mu.Lock()
	running := a.inDrain
	if !a.noDrain {
		a.noDrain = true
		close(a.stopDrain)
	}
	a.mu.Unlock()
	if !running {
		return
	}
	select {
	case <-a.drained:
	case <-ctx.Done():
	}
}

func (a *Alongside) run(ctx context.Context) {
	g := &registration{r: a.r, taskID: a.taskID, body: a.body, log: a.r.logger().With("task_id", a.taskID),
		later: "retried while the command runs, then by a later start or spool flush"}
	start := time.Now()
	g.hold = start.Add(alongsideHold)
	if a.r.Queue != nil {
		g.enqueue(ctx, "")
	}
	close(a.ahead)
	out := a.register(ctx, g)
	if out == Spooled {
		// Not trying any more: a later start or the drainer may send it now.
		a.holdEntry(context.WithoutCancel(ctx), g, time.Time{})
	}
	attrs := []any{"outcome", out.String(), "attempts", g.attempts, "elapsed", time.Since(start).Round(time.Millisecond)}
	if g.lastErr != nil && out != Delivered {
		attrs = append(attrs, "err", a.r.Client.Redact(g.lastErr.Error()))
	}
	g.log.Info("registration", attrs...)
	a.resolve(out)
	if out != Delivered || a.drain == nil {
		return
	}
	a.mu.Lock()
	if a.noDrain {
		a.mu.Unlock()
		return
	}
	a.inDrain = true
	a.mu.Unlock()
	defer close(a.drained)
	a.drainBacklog(ctx)
}

// register tries until the registration is delivered or refused, or
// Finish was called after a failed try, or ctx is done.
func (a *Alongside) register(ctx context.Context, g *registration) Outcome {
	b := AlongsideRetry.BackOff()
	for {
		dec, err := g.try(ctx, deliver.AttemptTimeout)
		switch dec.Action {
		case deliver.Remove:
			if g.spooled {
				dropDelivered(ctx, true, a.r.Queue, g.id, g.log, "")
			}
			return Delivered
		case deliver.Bury:
			g.lastErr = err
			g.bury(context.WithoutCancel(ctx), dec.Answer(a.r.Client, err))
			return Dead
		}
		g.lastErr = err
		g.log.Debug("registration attempt failed", "attempt", g.attempts, "err", a.r.Client.Redact(err.Error()))
		if ctx.Err() != nil || deliver.Classify(err) == deliver.Unusable {
			return g.kept()
		}
		g.remember(ctx, err)
		a.holdEntry(ctx, g, time.Now().Add(alongsideHold))
		if closed(a.hurry) {
			return g.kept()
		}
		policy, asked := deliver.NextWait(b, err)
		t := time.NewTimer(min(max(policy, asked), AlongsideRetry.Max))
		select {
		case <-t.C:
			continue
		case <-a.hurry:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return g.kept()
		}
	}
}

// holdEntry renews (or, with a zero time, releases) the hold on the
// registration's spool entry.
func (a *Alongside) holdEntry(ctx context.Context, g *registration, until time.Time) {
	h, ok := a.r.Queue.(holder)
	if !ok || !g.spooled {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, afterDeliveryTimeout)
	defer cancel()
	if err := h.Hold(hctx, g.id, until); err != nil {
		g.log.Debug("spool: hold not recorded", "err", err)
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (a *Alongside) drainBacklog(ctx context.Context) {
	for a.drain(ctx) {
		t := time.NewTimer(drainEvery)
		select {
		case <-t.C:
		case <-a.hurry:
			t.Stop()
			return
		case <-a.stopDrain:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}
