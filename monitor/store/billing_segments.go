package store

import (
	"context"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// segment is a part of an observation window read one way: whole hours
// from the hourly roll-ups; a part of an hour from the raw reports, to
// the second (raw); or, where the raw reports are no longer kept
// (--raw-retention), from its hour's roll-up in proportion.
type segment struct {
	from, to int64
	raw      bool
}

// segments cuts [from, to) into its whole hours and the parts of hours at
// its ends, each read from what answers it exactly (the ledger's rule:
// ledger.Compute reads the same parts the same way).
func (s *Store) segments(ctx context.Context, from, to int64) ([]segment, error) {
	var out []segment
	edge := func(a, b int64) error {
		if b <= a {
			return nil
		}
		complete, _, err := s.RawComplete(ctx, a, b)
		if err != nil {
			return err
		}
		out = append(out, segment{from: a, to: b, raw: complete})
		return nil
	}
	lo, hi := from+mod(-from, 3600), to-mod(to, 3600)
	if lo > hi {
		// Both ends inside one hour.
		return out, edge(from, to)
	}
	if err := edge(from, lo); err != nil {
		return nil, err
	}
	if hi > lo {
		out = append(out, segment{from: lo, to: hi})
	}
	return out, edge(hi, to)
}

// segmentGroups reads the users' use of segment sg: from the roll-ups
// grouped by node and user, or from the raw reports one (hour, node, GPU
// instance, user) a group.
func (s *Store) segmentGroups(ctx context.Context, sg segment) ([]billingGroup, error) {
	if !sg.raw {
		return s.billingUsers(ctx, sg)
	}
	_, users, err := s.rawRollup(ctx, sg.from, sg.to)
	if err != nil {
		return nil, err
	}
	out := make([]billingGroup, 0, len(users))
	for _, u := range users {
		out = append(out, billingGroup{seg: sg, node: u.Node, key: u.User.Key(), user: u.User, minLast: u.LastTime, maxLast: u.LastTime,
			use: facts.InstanceUse{MIG: u.GPUInstanceID >= 0, Model: u.Model, Profile: u.Profile, Slices: u.Slices, TotalSlices: u.Total,
				Seconds: u.Equal, BusySeconds: u.BusyEqual, EnergyJoules: u.Energy}})
	}
	return out, nil
}
