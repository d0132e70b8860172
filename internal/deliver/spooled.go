package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// flushBatch is how many entries Flush reads from the spool at a time.
const flushBatch = 100

// Check vets a payload read back from a spool before it is sent and
// returns its task id, the Idempotency-Key it is sent with; an error moves
// the entry to the dead letters with the reason. Each program passes its
// own: the entrypoint the policy and sensitive-data checks of labels, the
// node agent the contract's key rule (docs/security.md, "What the node
// agent's drainer checks").
type Check func(payload []byte) (taskID string, err error)

// TaskIDOf returns the task_id of a registration body: the only key a
// stored body may be sent under, whatever the entry around it says.
func TaskIDOf(payload []byte) (string, error) {
	var b struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(payload, &b); err != nil || b.TaskID == "" {
		return "", errors.New("payload refused: no task_id")
	}
	return b.TaskID, nil
}

// Spooled sends a task spool's entries, registrations and completions,
// for every program that does (a start's backlog, a supervisor, `spool
// flush`, the node agent's drainer), with EntrypointPolicy.
type Spooled struct {
	Client *Client
	// ClientFor returns the client that sends an entry written for the
	// token with fingerprint fp; nil, or a nil answer: Client.
	ClientFor func(fp string) *Client
	// Check vets each stored payload; nil: TaskIDOf.
	Check Check
	// Backoff: skip entries whose own backoff since their last attempt has
	// not passed (a drainer that passes again and again).
	Backoff bool
	Logger  *slog.Logger
}

func (s Spooled) check(payload []byte) (string, error) {
	if s.Check == nil {
		return TaskIDOf(payload)
	}
	return s.Check(payload)
}

// Registrations is the delivery engine for the spooled registrations of q.
func (s Spooled) Registrations(q Pending) *Deliverer {
	return &Deliverer{
		Queue:     q,
		Transport: Transport{Client: s.Client, Path: wire.RegisterPath},
		Policy:    EntrypointPolicy,
		Check:     func(e spool.Entry) (string, error) { return s.check(e.Payload) },
		ClientFor: s.ClientFor,
		Backoff:   s.Backoff,
		Logger:    s.Logger,
		Noun:      "registration",
	}
}

// Completions is the delivery engine for the spooled completions of q:
// each is vetted by Check, and refused unless its payload's task id is the
// entry's, then sent to the completion endpoint with Idempotency-Key
// <task_id>/complete.
func (s Spooled) Completions(q Pending) *Deliverer {
	return &Deliverer{
		Queue:     q,
		Transport: CompletionTransport(s.Client),
		Policy:    EntrypointPolicy,
		Check: func(e spool.Entry) (string, error) {
			key, err := s.check(e.Payload)
			if err != nil {
				return "", err
			}
			if key != e.TaskID {
				return "", errors.New("payload refused: its task_id is not the entry's")
			}
			return key, nil
		},
		ClientFor: s.ClientFor,
		Logger:    s.Logger,
		Noun:      "completion",
	}
}

// CompletionTransport posts to the completion endpoint, with
// Idempotency-Key <task_id>/complete.
func CompletionTransport(c *Client) Transport {
	return Transport{Client: c, Path: wire.CompletePath, KeySuffix: "/complete"}
}

// errRefused marks a stored payload that the check refused.
var errRefused = errors.New("refused before sending")

// SendStored vets a stored registration as Registrations does and makes
// one attempt to deliver it under its own task id; nil means delivered
// (2xx or 409). It keeps nothing: for entries that live outside a spool
// file that can be written (a corrupt file renamed aside, read by salvage).
func (s Spooled) SendStored(ctx context.Context, payload []byte) error {
	key, err := s.check(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	return s.Client.Post(actx, wire.RegisterPath, key, payload)
}

// Permanent reports whether an error of SendStored means the payload must
// never be sent: refused by the check, or for good by the monitor.
func Permanent(err error) bool {
	return errors.Is(err, errRefused) || Classify(err) == Refused
}
