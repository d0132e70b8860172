package spool

import (
	"fmt"
	"regexp"
)

// Kind names the buckets one kind of entry lives in: registrations,
// completions, or any other kind a program queues (the node agent's
// reports). Every kind follows the same rules (the package comment's
// guarantees), through one type, Queue; what differs is kept here:
//
//   - its buckets: the previous format's (no fingerprint; its sequence
//     numbers the kind's entries, so an id names one entry of the kind
//     whichever bucket holds it) and those with a fingerprint, which
//     versions that read only the former never see;
//   - the meta keys counting what the bounds dropped;
//   - what MaxAge does: moves an entry to the dead letters with the answer
//     "expired" (registrations, completions), or drops it with a count
//     (a kind made with DropExpired);
//   - an order between kinds: a completion is handed out only while its
//     task's registration is not pending.
type Kind struct {
	name                    string
	pending, dead           []byte
	pendingT, deadT         []byte
	keyDropped, keyDeadDrop []byte
	keyExpired              []byte // meta key counting entries dropped by age; nil: buried as "expired"
	after                   *Kind  // an entry waits while its task is pending in this kind
}

// Registrations are the tasks' registrations: buckets pending, dead,
// pending_by_token and dead_by_token, as every version has written them.
var Registrations = Kind{
	name:    "registrations",
	pending: bucketPending, dead: bucketDead,
	pendingT: bucketPendingT, deadT: bucketDeadT,
	keyDropped: keyDropped, keyDeadDrop: keyDeadDropped,
}

// Completions are supervise mode's completions: buckets completions,
// completions_dead, completions_by_token and completions_dead_by_token,
// one counter for both bounds. A completion is handed out only while its
// task's registration is not pending, so the monitor always hears of a
// task's start before its end.
var Completions = Kind{
	name:    "completions",
	pending: bucketCompletions, dead: bucketCompletionsDead,
	pendingT: bucketCompletionsT, deadT: bucketCompletionsDeadT,
	keyDropped: keyCompletionsDropped, keyDeadDrop: keyCompletionsDropped,
	after: &Registrations,
}

// kindName is the rule for a new kind's name; it must not take the name of
// a bucket the file has already.
var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// NewKind returns a kind of its own in any spool file: buckets <name>,
// <name>_dead, <name>_by_token and <name>_dead_by_token, counters
// <name>_dropped and <name>_dead_dropped in the meta bucket. The name is
// 1 to 32 lower-case letters, digits and underscores, starting with a
// letter, and none of the names the file's other buckets use.
func NewKind(name string) (Kind, error) {
	if !kindName.MatchString(name) {
		return Kind{}, fmt.Errorf("spool: kind name %q: want 1 to 32 of a-z, 0-9 and _, starting with a letter", name)
	}
	k := Kind{
		name:    name,
		pending: []byte(name), dead: []byte(name + "_dead"),
		pendingT: []byte(name + "_by_token"), deadT: []byte(name + "_dead_by_token"),
		keyDropped: []byte(name + "_dropped"), keyDeadDrop: []byte(name + "_dead_dropped"),
	}
	if name == Registrations.name {
		return Kind{}, fmt.Errorf("spool: kind name %q is taken by a kind of this package", name)
	}
	for _, own := range [][]byte{k.pending, k.dead, k.pendingT, k.deadT} {
		for _, taken := range [][]byte{bucketPending, bucketDead, bucketPendingT, bucketDeadT, bucketMeta, bucketOutage,
			bucketCompletions, bucketCompletionsDead, bucketCompletionsT, bucketCompletionsDeadT} {
			if string(own) == string(taken) {
				return Kind{}, fmt.Errorf("spool: kind name %q: its bucket %q is one the file has already", name, own)
			}
		}
	}
	return k, nil
}

// DropExpired returns k with MaxAge dropping an entry past it (deleted
// and counted in Stats.Expired, meta key <name>_expired) instead of moving
// it to the dead letters: what the node agent does with reports older
// than --max-report-age.
func (k Kind) DropExpired() Kind {
	k.keyExpired = []byte(k.name + "_expired")
	return k
}

// Name returns the kind's name.
func (k Kind) Name() string { return k.name }

// valid reports whether k was made by this package (a zero Kind has no
// buckets).
func (k Kind) valid() bool { return k.name != "" }
