package spool

import (
	"fmt"
	"regexp"
	"slices"
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

// Registrations are the tasks' registrations, in the buckets every version
// has written them to. Keys of pending and dead are 8-byte big-endian ids
// from the pending bucket's sequence, so a cursor walks them oldest first
// and an id stays unique when an entry moves between the two. Entrypoints
// of older versions never read pending_by_token and dead_by_token: they
// would send those entries under whatever token they hold.
var Registrations = Kind{
	name:    "registrations",
	pending: []byte("pending"), dead: []byte("dead"),
	pendingT: []byte("pending_by_token"), deadT: []byte("dead_by_token"),
	keyDropped: []byte("dropped"), keyDeadDrop: []byte("dead_dropped"),
}

// Completions are supervise mode's completions, one counter for both
// bounds, in buckets of their own, which entrypoints of older versions
// never read: none of them can ever send a completion as a registration.
// A completion is handed out only while its task's registration is not
// pending, so the monitor always hears of a task's start before its end.
// Salvage of a corrupt file carries registrations over, not completions.
var Completions = Kind{
	name:    "completions",
	pending: []byte("completions"), dead: []byte("completions_dead"),
	pendingT: []byte("completions_by_token"), deadT: []byte("completions_dead_by_token"),
	keyDropped: []byte("completions_dropped"), keyDeadDrop: []byte("completions_dropped"),
	after: &Registrations,
}

// names are the kind's four buckets.
func (k Kind) names() [][]byte { return [][]byte{k.pending, k.dead, k.pendingT, k.deadT} }

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
	taken := slices.Concat(Registrations.names(), Completions.names(), [][]byte{bucketMeta, bucketOutage})
	for _, own := range k.names() {
		for _, t := range taken {
			if string(own) == string(t) {
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
