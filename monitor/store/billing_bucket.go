package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// A segment of exactly one month, day or hour (report --month reads one
// month bucket) is read as its table stores it: the bucket is the first
// column of the primary key, so its rows are one range of it, with no
// GROUP BY for the engine to sort 300,000 users by at fleet size. The
// rows of one group (a user's GPUs on a node) are summed here, in the
// primary key's order, and the groups put in billingUsersSQL's order.

// billingRowsSQL: the rows of one bucket of grain, only the columns
// billing reads. An hourly row keeps only its last report time (the first
// is the same for the sums: MIN(last_time)).
func billingRowsSQL(grain string) string {
	first := "first_time"
	if grain == "hour" {
		first = "last_time"
	}
	return `SELECT node, user_key, gpu_instance_id, model, profile, slices, total_slices, ` + first + `, last_time,
		equal_s, busy_equal_s, energy_j FROM node_user_` + grain + `s WHERE ` + grain + ` = ?`
}

// billingRowsByGrain are billingRowsSQL's statements, each served by its
// table's primary key (bucket first).
var billingRowsByGrain = func() map[string]*stmt {
	out := map[string]*stmt{}
	for _, g := range Grains {
		table := "node_user_" + g + "s"
		out[g] = &stmt{sql: billingRowsSQL(g), sqliteIndex: "sqlite_autoindex_" + table + "_1", postgresIndex: table + "_pkey",
			example: []any{int64(1796130000)}}
	}
	return out
}()

func init() {
	for _, g := range Grains {
		readStatements["billing user rows of one "+g] = billingRowsByGrain[g]
	}
}

// billingGroupKey is what billingUsersSQL groups by.
type billingGroupKey struct {
	node, key, model, profile string
	mig                       bool
	slices, total             int64
}

// billingBucketUsers reads the rows of sg, one whole bucket of its grain,
// and sums them by node and user as billingUsersSQL does, in its order.
func (s *Store) billingBucketUsers(ctx context.Context, sg segment) ([]billingGroup, error) {
	rows, err := s.query(ctx, s.r, billingRowsByGrain[sg.grain], sg.from)
	if err != nil {
		return nil, fmt.Errorf("store: billing: %w", err)
	}
	var out []billingGroup
	at := map[billingGroupKey]int{}
	if err := eachRow(rows, "billing", func() error {
		var r billingGroup
		var gi, first, last int64
		var sec, busy, energy float64
		if err := rows.Scan(&r.node, &r.key, &gi, &r.use.Model, &r.use.Profile, &r.use.Slices, &r.use.TotalSlices,
			&first, &last, &sec, &busy, &energy); err != nil {
			return err
		}
		r.use.MIG = gi >= 0
		k := billingGroupKey{r.node, r.key, r.use.Model, r.use.Profile, r.use.MIG, r.use.Slices, r.use.TotalSlices}
		if i, ok := at[k]; ok {
			g := &out[i]
			g.minLast, g.maxLast = min(g.minLast, first), max(g.maxLast, last)
			g.use.Seconds += sec
			g.use.BusySeconds += busy
			g.use.EnergyJoules += energy
			return nil
		}
		at[k] = len(out)
		r.seg, r.minLast, r.maxLast = sg, first, last
		r.use.Seconds, r.use.BusySeconds, r.use.EnergyJoules = sec, busy, energy
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, compareBillingGroups)
	return out, nil
}

// compareBillingGroups orders groups as billingUsersSQL's GROUP BY does:
// node, user key, kind of instance (whole GPUs first), model, profile,
// slices.
func compareBillingGroups(a, b billingGroup) int {
	return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.key, b.key), cmpBool(a.use.MIG, b.use.MIG),
		cmp.Compare(a.use.Model, b.use.Model), cmp.Compare(a.use.Profile, b.use.Profile),
		cmp.Compare(a.use.Slices, b.use.Slices), cmp.Compare(a.use.TotalSlices, b.use.TotalSlices))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
