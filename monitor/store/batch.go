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
	reply
}

// reply is how a queued write is answered: its error, set by the batch,
// and done, closed once the batch is committed.
type reply struct {
	err  error
	done chan struct{}
}

func newReply() reply { return reply{done: make(chan struct{})} }

func (r *reply) answer()     { close(r.done) }
func (r *reply) wait() error { <-r.done; return r.err }

// awaited is a request of a batcher (batchReq, hbReq).
type awaited interface {
	answer()
	wait() error
}

// enqueue hands req to lane and waits for its batch's commit. The error
// is the request's, or the commit's: an answer only once the write is on
// disk. what names the write in errors.
func enqueue[T awaited](ctx context.Context, lane chan<- T, quit <-chan struct{}, what string, req T) error {
	select {
	case lane <- req:
	case <-ctx.Done():
		return fmt.Errorf("store: %s: %w", what, ctx.Err())
	case <-quit:
		return fmt.Errorf("store: %s: the store is closed", what)
	}
	// Once taken, the request is answered whatever the caller's context
	// does: it may already be committed.
	return req.wait()
}

// serve commits the batches of reqs until quit is closed, answering the
// requests of each batch once commit has written it.
func serve[T awaited](reqs <-chan T, quit <-chan struct{}, commit func([]T)) {
	for {
		batch, ok := gather(reqs, quit)
		if !ok {
			return
		}
		commit(batch)
		for _, req := range batch {
			req.answer()
		}
	}
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
	return enqueue(ctx, b.reqs, b.quit, what, &batchReq{ctx: ctx, what: what, op: op, single: single, reply: newReply()})
}

// close stops the loop after the batch in progress; safe to call twice
// (Store.Close is).
func (b *batcher) close() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

// gather waits for a request, then takes every one already waiting, up to
// maxBatch: the next batch, or false once quit is closed.
func gather[T any](reqs <-chan T, quit <-chan struct{}) ([]T, bool) {
	var batch []T
	select {
	case req := <-reqs:
		batch = append(batch, req)
	case <-quit:
		return nil, false
	}
	for len(batch) < maxBatch {
		select {
		case req := <-reqs:
			batch = append(batch, req)
		default:
			return batch, true
		}
	}
	return batch, true
}

func (b *batcher) loop() {
	defer close(b.done)
	serve(b.reqs, b.quit, b.commit)
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

// hbBatcher groups concurrent heartbeats on PostgreSQL (senders that see
// every task): one pipeline of statements (stmtHeartbeatTaskID, one per
// task_id), so one round trip and one commit (one WAL flush), updates the
// tasks of every heartbeat waiting, and each caller is answered after
// that commit. A heartbeat alone is a statement of a few
// microseconds and a commit; fifty clients would otherwise spend the two
// cores on commits. Heartbeats are sharded by task_id over lanes, each
// with one statement in flight at a time: the tasks of two statements in
// flight never overlap, so two batches never wait for each other's row
// locks (no deadlock), and the heartbeats of one task are applied in
// order of arrival at their lane.
type hbBatcher struct {
	s     *Store
	lanes []chan *hbReq
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

type hbReq struct {
	ctx    context.Context
	taskID string
	at     int64
	reply
}

// hbLanes: statements in flight at once (PostgreSQL runs them on as many
// connections of the pool).
const hbLanes = 1

func newHBBatcher(s *Store) *hbBatcher {
	b := &hbBatcher{s: s, quit: make(chan struct{})}
	for range hbLanes {
		ch := make(chan *hbReq)
		b.lanes = append(b.lanes, ch)
		b.wg.Add(1)
		go b.loop(ch)
	}
	return b
}

// run queues a heartbeat and waits for its batch's commit: nil, ErrNotFound
// (no task under the id) or the statement's error.
func (b *hbBatcher) run(ctx context.Context, taskID string, at int64) error {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(taskID); i++ {
		h = (h ^ uint32(taskID[i])) * 16777619
	}
	req := &hbReq{ctx: ctx, taskID: taskID, at: at, reply: newReply()}
	return enqueue(ctx, b.lanes[h%uint32(len(b.lanes))], b.quit, "heartbeat "+taskID, req)
}

func (b *hbBatcher) close() {
	b.once.Do(func() { close(b.quit) })
	b.wg.Wait()
}

func (b *hbBatcher) loop(reqs chan *hbReq) {
	defer b.wg.Done()
	serve(reqs, b.quit, b.commit)
}

// commit applies a batch of heartbeats in one pipeline. Several
// heartbeats of one task_id are one statement of it, at their latest time
// (the last-seen time only moves forward, so that is what applying each
// would leave).
func (b *hbBatcher) commit(batch []*hbReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	at := map[string]int64{}
	var ids []string
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.err = fmt.Errorf("store: heartbeat %s: %w", req.taskID, err)
			continue
		}
		if t, ok := at[req.taskID]; !ok {
			ids = append(ids, req.taskID)
			at[req.taskID] = req.at
		} else if req.at > t {
			at[req.taskID] = req.at
		}
	}
	if len(ids) == 0 {
		return
	}
	ats := make([]int64, len(ids))
	for i, id := range ids {
		ats[i] = at[id]
	}
	fail := func(err error) {
		for _, req := range batch {
			if req.err == nil {
				req.err = fmt.Errorf("store: heartbeat %s: %w", req.taskID, err)
			}
		}
	}
	now := b.s.now().Unix()
	args := make([][]any, len(ids))
	for i, id := range ids {
		args[i] = []any{ats[i], ats[i], now, now, id}
	}
	n, err := b.s.pipeline(ctx, stmtHeartbeatTaskID, args)
	if err != nil {
		fail(err)
		return
	}
	updated := map[string]bool{}
	for i, id := range ids {
		updated[id] = n[i] > 0
	}
	var missing []string
	for _, id := range ids {
		if !updated[id] {
			missing = append(missing, id)
		}
	}
	stored := map[string]bool{}
	if len(missing) > 0 {
		// Completed (200: the newest task's last_seen moves) or unknown
		// (404).
		done := make([][]any, len(missing))
		for i, id := range missing {
			done[i] = []any{at[id], at[id], id}
		}
		n, err := b.s.pipeline(ctx, stmtHeartbeatDoneTaskID, done)
		if err != nil {
			fail(err)
			return
		}
		for i, id := range missing {
			stored[id] = n[i] > 0
		}
	}
	for _, req := range batch {
		if req.err == nil && !updated[req.taskID] && !stored[req.taskID] {
			req.err = ErrNotFound
		}
	}
}
