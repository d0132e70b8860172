// Package drain sends what the task spools hold, for both programs that
// do: the entrypoint (`spool flush`, `spool flush --all --watch`) and the
// node agent (`--drain-spools`, which calls Drainer.Pass every interval).
// Node holds what every sender shares: its Settings (filled by each
// program from its own settings table), the client, the spool, and the
// check of stored payloads, which each program passes (deliver.Check).
//
// Guarantees: an entry is sent only with the token it was written for (its
// fingerprint: the own token, one of a token directory, or with Legacy the
// own token for entries of the previous format), never with another, more
// powerful one; every stored payload passes the program's check again
// before it is sent (the entrypoint's label policy, or the contract); a
// file renamed aside after corruption is read, never written, and renamed
// .drained once nothing in it is left to send.
package drain

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// Result is the line `spool flush` prints per spool file and pass.
type Result struct {
	Spool     string `json:"spool"`
	Delivered int    `json:"delivered"`
	Dead      int    `json:"dead"`
	// Pending is what is left after the pass; null when it could not be
	// counted (the file is locked or unreadable): never a reassuring 0.
	Pending *int `json:"pending"`
	// Foreign counts the pending entries this flush may not send: another
	// token's (one --token-dir does not hold), or of the previous format
	// without --legacy. They are left as they are; exit 0 does not wait
	// for them.
	Foreign int `json:"foreign"`
	// Legacy counts the pending entries of the previous format.
	Legacy int `json:"legacy,omitempty"`
	// Locked: another process held the file's lock past the timeout.
	Locked bool   `json:"locked,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Drainer drains spool files to the configured monitor, each entry with
// the token it was written for: the own token, one of the token directory
// (re-read at every pass), and with Legacy the own token for the previous
// format too. `spool flush` runs it once (Flush), `spool flush --watch`
// every interval; a node agent calls Pass at its own interval.
type Drainer struct {
	Node
	All      bool   // every per-UID spool file of the spool file's directory
	TokenDir string // a directory of monitor tokens, one per file; "": none
	Legacy   bool   // also the entries of the previous format (no fingerprint)
	// Watch is a continuous drainer: entries others hold are left to them,
	// and the backoff of failed entries is kept (an operator's one-off
	// flush tries every entry now), and an unreadable token or spool
	// directory is logged and the pass goes on.
	Watch bool

	own *deliver.Client // the client of the own token, made once
}

// Pass makes one pass over the spool files and returns a Result for each.
// The error is an unreadable token directory or spool directory, which
// ends the pass unless the drainer is Watch.
func (d *Drainer) Pass(ctx context.Context) ([]Result, error) {
	cfg, log := d.Settings, d.Log
	if d.own == nil {
		d.own = d.Client()
	}
	t := newTokens(d.own)
	t.legacy, t.watch = d.Legacy, d.Watch
	if d.TokenDir != "" {
		dir, err := readTokenDir(d.TokenDir, d.own)
		if err != nil {
			log.Error("spool flush: token directory unreadable", "err", err)
			if !d.Watch {
				return nil, err
			}
		}
		t.dir = dir
	}
	// An operator's one-off flush tries every entry now; a watching
	// drainer lets each entry's backoff pass.
	sp := deliver.Spooled{Client: t.own, ClientFor: t.ClientFor, Check: d.check(), Backoff: d.Watch, Logger: d.Log}
	paths := []string{cfg.SpoolPath}
	if d.All {
		var err error
		paths, err = spool.Files(filepath.Dir(cfg.SpoolPath))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error("spool directory unreadable", "dir", filepath.Dir(cfg.SpoolPath), "err", err)
			if !d.Watch {
				return nil, err
			}
		}
	}
	results := make([]Result, 0, len(paths))
	for _, path := range paths {
		results = append(results, d.file(ctx, sp, t, path))
	}
	return results, nil
}

// Flush is `spool flush`: without Watch one pass, exit status 0 when
// nothing it may send is left pending; with Watch a pass every interval
// until ctx ends (SIGTERM or SIGINT), then 0. Each file's Result goes to
// out (with Watch only those where something was sent).
func (d *Drainer) Flush(ctx context.Context, out *json.Encoder, interval time.Duration) int {
	log := d.Log
	wasFailing := false
	for {
		results, err := d.Pass(ctx)
		if err != nil {
			return ExitIncomplete
		}
		complete, failing, lastErr := true, false, ""
		for _, res := range results {
			if res.Pending == nil || *res.Pending > 0 || res.Error != "" {
				complete = false
			}
			if res.Error != "" {
				failing, lastErr = true, res.Error
			}
			if !d.Watch || res.Delivered+res.Dead > 0 {
				out.Encode(res)
			}
		}
		if !d.Watch {
			if complete {
				return 0
			}
			log.Warn("spool flush: entries left pending", "err", lastErr)
			return ExitIncomplete
		}
		if failing && !wasFailing {
			log.Warn("spool flush: entries left pending; trying again every interval", "interval", interval, "err", lastErr)
		}
		wasFailing = failing
		tm := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			tm.Stop()
			log.Info("spool flush: stopped by a signal")
			return 0
		case <-tm.C:
		}
	}
}

// file makes one pass over one spool file.
func (d *Drainer) file(ctx context.Context, sp deliver.Spooled, t *tokens, path string) Result {
	log := d.Log
	if spool.IsAside(path) {
		return drainAside(ctx, sp, t, path, log)
	}
	s := d.spoolAt(path, t.Sendable)
	if s != nil && !t.watch {
		// An operator's one-off flush: the entries of a supervisor
		// killed a moment ago are sent now, not after their hold.
		s = s.IgnoringHolds()
	}
	res := Result{Spool: path}
	fr, err := flushRegistrations(ctx, sp, s)
	if err == nil && fr.Stopped == nil {
		fr, err = FlushCompletions(ctx, sp, s, 0, fr, log)
	}
	res.Delivered, res.Dead = fr.Delivered, fr.Dead
	switch {
	case err != nil:
		res.Error = sp.Client.Redact(err.Error())
		res.Locked = errors.Is(err, spool.ErrLocked)
		log.Warn("spool flush: spool unusable", "spool", path, "err", res.Error)
	case fr.Stopped != nil && ctx.Err() == nil:
		res.Error = sp.Client.Redact(fr.Stopped.Error())
	}
	// A fresh context: the count is wanted even when a signal ended the pass.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LockTimeout)
	defer cancel()
	st, err := StatsOf(sctx, s)
	if err != nil {
		res.Locked = res.Locked || errors.Is(err, spool.ErrLocked)
		if res.Error == "" {
			res.Error = sp.Client.Redact(err.Error())
		}
		return res
	}
	pending := st.Pending + st.CompletionsPending
	// What is left that this flush may send; the others are foreign.
	pending -= st.Foreign
	res.Pending, res.Foreign, res.Legacy = &pending, st.Foreign, st.Legacy
	if fr.Delivered+fr.Dead > 0 || st.Foreign > 0 {
		log.Info("spool flush", "spool", path, "delivered", fr.Delivered, "dead", fr.Dead, "pending", pending, "foreign", st.Foreign)
	}
	return res
}

// drainAside delivers the pending entries salvaged from a corrupt file
// renamed aside (a quarantine carried them into the fresh spool too, but a
// salvage can only ever be as good as the version that made it: this one
// may read more). The file is never written; once every entry is delivered
// or refused for good, it is renamed to <name>.drained, which no drainer
// reads again. Entries are sent with their own task ids, so one already
// delivered from the fresh spool is answered 409.
func drainAside(ctx context.Context, sp deliver.Spooled, t *tokens, path string, log *slog.Logger) Result {
	res := Result{Spool: path}
	pending, _, err := spool.Salvaged(path)
	if err != nil && len(pending) == 0 {
		res.Error = sp.Client.Redact(err.Error())
		return res
	}
	left := 0
	for _, e := range pending {
		if ctx.Err() != nil {
			left++
			continue
		}
		if !t.Sendable(e.Fingerprint) {
			res.Foreign++ // another token's: never sent with ours
			continue
		}
		switch serr := sp.SendStored(ctx, e.Payload); {
		case serr == nil:
			res.Delivered++
		case deliver.Permanent(serr):
			res.Dead++
			log.Error("spool: entry salvaged from a corrupt file refused for good; it stays in that file", "spool", path, "task_id", e.TaskID, "answer", sp.Client.Redact(serr.Error()))
		default:
			left++
			res.Error = sp.Client.Redact(serr.Error())
		}
	}
	res.Pending = &left
	if left == 0 && ctx.Err() == nil {
		if err := os.Rename(path, path+spool.DrainedSuffix); err != nil {
			res.Error = err.Error()
		}
	}
	if res.Delivered+res.Dead > 0 {
		log.Info("spool flush: salvaged entries of a corrupt file", "spool", path, "delivered", res.Delivered, "dead", res.Dead, "pending", left)
	}
	return res
}

// flushRegistrations sends the pending registrations of spool file s
// (deliver.Spooled.Registrations) and, when some were delivered, clears
// the file's memory of an outage of that monitor, as a start's own
// registrar does.
func flushRegistrations(ctx context.Context, sp deliver.Spooled, s *spool.Spool) (deliver.FlushResult, error) {
	res, err := sp.Registrations(s.Registrations()).Flush(ctx, 0)
	if res.Delivered > 0 && sp.Client.Base() != "" {
		if cerr := s.ClearOutage(ctx, sp.Client.Base()); cerr != nil {
			sp.Logger.Debug("outage record not cleared", "err", cerr)
		}
	}
	return res, err
}
