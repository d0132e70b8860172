package store

import (
	"context"
	"database/sql"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// segment is a part of an observation window read one way: whole months,
// days or hours from the roll-ups of that grain (ledger_grains.go); a part
// of an hour from the raw reports, to the second (raw); or, where the raw
// reports are no longer kept (--raw-retention), from its hour's roll-up
// in proportion (grain "hour").
type segment struct {
	grain    string
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
		out = append(out, segment{grain: "hour", from: a, to: b, raw: complete})
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
		for _, p := range grainParts(lo, hi) {
			out = append(out, segment{grain: p.grain, from: p.from, to: p.to})
		}
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

// resolveGroup cuts group g where its report times tie to different
// registrations (cands): a group whose first and last report times tie
// alike stays whole; an hour's group (or a part of an hour) is cut by
// report time (billingUserTimes); a day's or month's group by its buckets
// one grain finer, each resolved in turn (as a whole where those are no
// longer kept), so that the report ties as the ledger does.
func (s *Store) resolveGroup(ctx context.Context, g billingGroup, cands []Tie) ([]billingGroup, error) {
	if latestTie(cands, g.minLast) == latestTie(cands, g.maxLast) {
		return []billingGroup{g}, nil
	}
	if g.seg.raw || g.seg.grain == "hour" {
		return s.billingUserTimes(ctx, g)
	}
	buckets, err := s.billingBuckets(ctx, g, finer(g.seg.grain))
	if err != nil || len(buckets) == 0 {
		return []billingGroup{g}, err
	}
	var out []billingGroup
	for _, b := range buckets {
		parts, err := s.resolveGroup(ctx, b, cands)
		if err != nil {
			return nil, err
		}
		out = append(out, parts...)
	}
	return out, nil
}

// billingBuckets is group g's use in its segment by bucket of grain.
func (s *Store) billingBuckets(ctx context.Context, g billingGroup, grain string) ([]billingGroup, error) {
	mig := 0
	if g.use.MIG {
		mig = 1
	}
	return builtRows(ctx, s, s.r, "billing", billingBucketsByGrain[grain], billingBucketsSQL(grain), func(rows *sql.Rows, p *billingGroup) error {
		*p = g
		var bucket int64
		err := rows.Scan(&bucket, &p.minLast, &p.maxLast, &p.use.Seconds, &p.use.BusySeconds, &p.use.EnergyJoules)
		p.seg = segment{grain: grain, from: bucket, to: bucketEnd(grain, bucket)}
		return err
	}, g.seg.from, g.seg.to, g.node, g.key, mig, g.use.Model, g.use.Profile, g.use.Slices, g.use.TotalSlices)
}
