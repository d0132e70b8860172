package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// batcher commits concurrent registrations together on SQLite (group
// commit). Every SQLite commit with synchronous=FULL costs an fsync, and
// SQLite has one writer at a time: a thousand tasks starting at once would
// otherwise queue for a thousand fsyncs. The batcher takes every
// registration waiting, writes each inside its own savepoint of one
// transaction (a failing one is rolled back alone), commits once, and only
// then answers each caller — so an answer still means "on disk".
type batcher struct {
	s    *Store
	reqs chan *batchReq
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

type batchReq struct {
	ctx     context.Context
	r       *Registration
	created bool
	err     error
	done    chan struct{}
}

// maxBatch bounds one transaction (and so the wait of its first caller).
const maxBatch = 256

func newBatcher(s *Store) *batcher {
	b := &batcher{s: s, reqs: make(chan *batchReq), quit: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *batcher) register(ctx context.Context, r *Registration) (bool, error) {
	req := &batchReq{ctx: ctx, r: r, done: make(chan struct{})}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, ctx.Err())
	case <-b.quit:
		return false, fmt.Errorf("store: register %s: the store is closed", r.TaskID)
	}
	// Once taken, the request is answered whatever the caller's context
	// does: it may already be committed.
	<-req.done
	return req.created, req.err
}

// close stops the loop after the batch in progress; safe to call twice
// (Store.Close is).
func (b *batcher) close() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

func (b *batcher) loop() {
	defer close(b.done)
	for {
		var batch []*batchReq
		select {
		case req := <-b.reqs:
			batch = append(batch, req)
		case <-b.quit:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case req := <-b.reqs:
				batch = append(batch, req)
			default:
				break more
			}
		}
		b.commit(batch)
		for _, req := range batch {
			close(req.done)
		}
	}
}

// commit writes a batch in one transaction, each registration in its own
// savepoint.
func (b *batcher) commit(batch []*batchReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fail := func(err error) {
		for _, req := range batch {
			req.created, req.err = false, fmt.Errorf("store: register %s: %w", req.r.TaskID, err)
		}
	}
	tx, err := b.s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	defer tx.Rollback()
	created := 0
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.err = fmt.Errorf("store: register %s: %w", req.r.TaskID, err)
			continue
		}
		req.created, req.err = b.savepoint(ctx, tx, req.r)
		if req.created {
			created++
		}
	}
	if created == 0 {
		return // nothing written: the rollback ends the transaction
	}
	if err := tx.Commit(); err != nil {
		// Nothing of the batch is stored: every caller gets the error
		// (an entrypoint retries a 5xx), those whose answer was "already
		// there" or a refusal included, since that answer is unproven.
		fail(fmt.Errorf("commit: %w", err))
	}
}

func (b *batcher) savepoint(ctx context.Context, tx *sql.Tx, r *Registration) (bool, error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT reg"); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	created, err := b.s.registerTx(ctx, tx, r)
	if err != nil {
		if _, rbErr := tx.ExecContext(ctx, "ROLLBACK TO reg"); rbErr != nil {
			return false, fmt.Errorf("store: register %s: %w (and rolling back: %v)", r.TaskID, err, rbErr)
		}
	}
	if _, relErr := tx.ExecContext(ctx, "RELEASE reg"); relErr != nil && err == nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, relErr)
	}
	return created, err
}
