// Package reportqueue is the node agent's report spool and its delivery to
// the monitor (docs/node.md, "The report"): a kind of its own
// ("node_reports") in a spool file of the programs' one spool (package
// spool), sent by the programs' one delivery engine (register.Deliverer)
// with the node agent's status table (register.ReportPolicy).
//
// Guarantees:
//   - A report is written to the spool (its own file, mode 0600, its
//     directory 0700) before it is sent, and deleted only after the
//     monitor answered 2xx or 409: a crash or a restart loses nothing the
//     disk held.
//   - Reports are sent oldest first (enqueued in time order); a pass stops
//     at the first report the monitor could not take (5xx, 429, a network
//     error, 401/403), retried with the entrypoint's backoff while the
//     pass's budget lasts, so the monitor sees them in order.
//   - A 400 or 413 moves that report to the dead letters (counted) without
//     blocking the rest; a report older than the maximum age is dropped and
//     counted.
//   - A 425 (a report ahead of the monitor's clock) keeps it, and no
//     report is sent before the answer's Retry-After; a 409 names the GPU
//     UUID conflicts of a report the monitor stored (Sender.OnConflict).
//   - Every attempt carries sent_at, the agent's clock when it sent; the
//     spooled body is never changed.
//   - The time of the newest report ever spooled is kept beside the spool
//     (<file>.last), so a restarted agent tiles on from it even when every
//     report was delivered.
package reportqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// Kind is the reports' kind in the spool file; past the maximum age a
// report is dropped with a count, not buried.
var Kind = func() spool.Kind {
	k, err := spool.NewKind("node_reports")
	if err != nil {
		panic(err)
	}
	return k.DropExpired()
}()

// ErrUnusable: the spool's directory or its files cannot be created.
var ErrUnusable = errors.New("report spool unusable")

// Stats counts the spool's reports.
type Stats struct {
	Pending, Dead, Dropped int
	Oldest                 time.Time // the oldest pending report's time (zero: none)
}

// Queue is the report spool.
type Queue struct {
	q    *spool.Queue
	last string // the file holding the newest report time ever spooled
}

// Open returns the spool at path (creating its directory 0700), with
// reports past maxAge dropped. It checks that the directory can be
// written.
func Open(path string, maxAge time.Duration, log *slog.Logger) (*Queue, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnusable, path, err)
	}
	q := &Queue{
		q:    spool.New(spool.Options{Path: path, MaxAge: maxAge, Logger: log}).Queue(Kind),
		last: path + ".last",
	}
	if _, err := q.q.Stats(context.Background()); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnusable, path, err)
	}
	if _, ok := q.Last(); !ok {
		// Written now, so an unwritable directory is a start-up error.
		if err := q.setLast(0); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Close releases nothing: the spool opens its file per operation.
func (q *Queue) Close() error { return nil }

// Spool is the spool's queue, for the delivery engine.
func (q *Queue) Spool() *spool.Queue { return q.q }

// Put spools a report body under its time, before it is sent.
func (q *Queue) Put(ctx context.Context, t int64, body []byte, fingerprint string) error {
	if _, err := q.q.Enqueue(ctx, spool.Entry{
		TaskID: strconv.FormatInt(t, 10), Payload: body, QueuedAt: time.Unix(t, 0), Fingerprint: fingerprint,
	}); err != nil {
		return err
	}
	if last, ok := q.Last(); !ok || last < t {
		return q.setLast(t)
	}
	return nil
}

func (q *Queue) setLast(t int64) error {
	tmp := q.last + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(t, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	if err := os.Rename(tmp, q.last); err != nil {
		return fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	return nil
}

// Last is the time of the newest report the spool ever held (false: none).
func (q *Queue) Last() (int64, bool) {
	b, err := os.ReadFile(q.last)
	if err != nil {
		return 0, false
	}
	t, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || t <= 0 {
		return 0, err == nil
	}
	return t, true
}

// Stats counts pending, dead and dropped reports.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	st, err := q.q.Stats(ctx)
	if err != nil {
		return Stats{}, err
	}
	s := Stats{Pending: st.Pending, Dead: st.Dead, Dropped: st.Expired + st.Dropped}
	if oldest, err := q.q.Oldest(ctx, 1); err == nil && len(oldest) == 1 {
		s.Oldest = oldest[0].QueuedAt
	}
	return s, nil
}
