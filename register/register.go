// Package register delivers a task's registration to the monitor API, and
// spools what it cannot deliver within the budget.
//
// CONTRACT PLACEHOLDER: the API below is fixed; the bodies are implemented by
// the registration work.
package register

import (
	"context"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// SchemaVersion is the version of the registration body.
const SchemaVersion = 1

// Body returns the registration body (schema version 1) for the labels and
// the GPUs.
func Body(s *labels.Set, inv gpu.Inventory) []byte { return []byte("{}") }

// ClientConfig configures the HTTP transport to the monitor.
type ClientConfig struct {
	URL       string // base URL; the path /v1/task/register is added
	TokenFile string // bearer token file, re-read at every attempt
	CAFile    string // extra CA bundle for https
	UserAgent string // paddle-entrypoint/<version>
}

// Client sends one registration attempt to the monitor.
type Client struct{}

// NewClient returns a client; a CA file that cannot be read is an error.
func NewClient(c ClientConfig) (*Client, error) { return &Client{}, nil }

// Queue is the spool as registration uses it. *spool.Spool implements it.
type Queue interface {
	Enqueue(ctx context.Context, e spool.Entry) (uint64, error)
	Attempted(ctx context.Context, id uint64, lastErr string) error
	Delete(ctx context.Context, id uint64) error
	Bury(ctx context.Context, id uint64, answer string) error
	BuryNew(ctx context.Context, e spool.Entry, answer string) error
	Oldest(ctx context.Context, n int) ([]spool.Entry, error)
}

// Registrar delivers registrations with retries, and spools them.
type Registrar struct {
	Client  *Client
	Queue   Queue // nil: spool off
	Logger  *slog.Logger
	Backlog int // older pending entries sent per start after our own
}

// Outcome is what became of a registration.
type Outcome int

// Outcomes.
const (
	Delivered Outcome = iota // the monitor answered 2xx or 409
	Spooled                  // pending in the spool for a later try
	Dead                     // refused for good; in the dead letters
	Lost                     // neither delivered nor spooled (spool off or broken)
)

// Register delivers taskID's body before ctx's deadline (the budget),
// spooling it at the first failure, and then spends what is left of the
// budget on older pending entries. On ctx cancellation (a signal) it makes
// sure the registration is spooled and returns at once.
func (r *Registrar) Register(ctx context.Context, taskID string, body []byte) Outcome {
	return Lost
}

// FlushResult counts what a flush did.
type FlushResult struct{ Delivered, Failed, Dead, Pending int }

// Flush sends pending entries oldest first, at most limit (0: all), until
// ctx is done.
func (r *Registrar) Flush(ctx context.Context, limit int) (FlushResult, error) {
	return FlushResult{}, nil
}

// AttemptTimeout bounds one attempt; the budget may cut it shorter.
const AttemptTimeout = 2 * time.Second
