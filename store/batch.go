package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// batcher commits concurrent writes together on SQLite (group commit).
// Every SQLite commit with synchronous=FULL costs an fsync, and SQLite has
// one writer at a time: a thousand tasks starting at once, or fifty
// clients sending heartbeats, would otherwise queue for a fsync each. The
// batcher takes every write waiting (registrations, completions,
// heartbeats), runs each inside its own savepoint of one transaction (a
// failing one is rolled back alone), commits once, and only then answers
// each caller — so an answer still means "on disk".
type batcher struct {
	s    *Store
	reqs chan *batchReq
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// batchReq is one write of a batch. op does the write in tx and reports
// whether it wrote anything; what it answers the caller it keeps itself
// (a closure), as the request's err is all the batcher sets.
type batchReq struct {
	ctx context.Context
	// what names the write in errors ("register t1").
	what string
	op   func(ctx context.Context, tx *sql.Tx) (wrote bool, err error)
	// single: op runs one write statement, which SQLite undoes alone when
	// it fails, so no savepoint is needed.
	single bool
	err    error
	done   chan struct{}
}

// maxBatch bounds one transaction (and so the wait of its first caller).
const maxBatch = 256

func newBatcher(s *Store) *batcher {
	b := &batcher{s: s, reqs: make(chan *batchReq), quit: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// run queues op and waits for the batch's commit. The error is op's, or the
// commit's: an answer only once the write is on disk.
func (b *batcher) run(ctx context.Context, what string, single bool, op func(ctx context.Context, tx *sql.Tx) (bool, error)) error {
	req := &batchReq{ctx: ctx, what: what, op: op, single: single, done: make(chan struct{})}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		return fmt.Errorf("store: %s: %w", what, ctx.Err())
	case <-b.quit:
		return fmt.Errorf("store: %s: the store is closed", what)
	}
	// Once taken, the request is answered whatever the caller's context
	// does: it may already be committed.
	<-req.done
	return req.err
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

// commit writes a batch in one transaction, each write in its own
// savepoint.
func (b *batcher) commit(batch []*batchReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fail := func(err error) {
		for _, req := range batch {
			req.err = fmt.Errorf("store: %s: %w", req.what, err)
		}
	}
	tx, err := b.s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	defer tx.Rollback()
	wrote := 0
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.err = fmt.Errorf("store: %s: %w", req.what, err)
			continue
		}
		var w bool
		if req.single {
			w, req.err = req.op(ctx, tx)
		} else {
			w, req.err = b.savepoint(ctx, tx, req)
		}
		if w {
			wrote++
		}
	}
	if wrote == 0 {
		return // nothing written: the rollback ends the transaction
	}
	if err := tx.Commit(); err != nil {
		// Nothing of the batch is stored: every caller gets the error
		// (an entrypoint retries a 5xx), those whose answer was "already
		// there" or a refusal included, since that answer is unproven.
		fail(fmt.Errorf("commit: %w", err))
	}
}

func (b *batcher) savepoint(ctx context.Context, tx *sql.Tx, req *batchReq) (bool, error) {
	if _, err := b.s.exec(ctx, tx, stmtSavepoint); err != nil {
		return false, fmt.Errorf("store: %s: %w", req.what, err)
	}
	wrote, err := req.op(ctx, tx)
	if err != nil {
		if _, rbErr := b.s.exec(ctx, tx, stmtRollbackTo); rbErr != nil {
			return false, fmt.Errorf("store: %s: %w (and rolling back: %v)", req.what, err, rbErr)
		}
	}
	if _, relErr := b.s.exec(ctx, tx, stmtReleaseSavepoint); relErr != nil && err == nil {
		return false, fmt.Errorf("store: %s: %w", req.what, relErr)
	}
	return wrote && err == nil, err
}
