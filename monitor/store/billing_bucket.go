package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// A segment of exactly one month, day or hour (report --month reads one
// month bucket) is read as its table stores it: the bucket is the first
// column of the primary key, so its rows are one range of it, with no
// GROUP BY for the engine to sort 300,000 users by at fleet size. The
// rows of one group (a user's GPUs on a node) are summed here, in the
// primary key's order, and the groups put in billingUsersSQL's order.

// billingRowsSQL: the rows of one bucket of grain, only the columns
// billing reads.
func billingRowsSQL(grain string) string {
	first := firstTimeColumn(grain)
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

// billingRow is one stored row of a bucket, the columns billingRowsSQL
// reads: a few words, where a billingGroup holds a user's whole identity,
// so that 300,000 of them are read and sorted without moving groups.
type billingRow struct {
	node, key, model, profile string
	mig                       bool
	slices, total             int64
	first, last               int64
	sec, busy, energy         float64
}

// billingBucketUsers reads the rows of sg, one whole bucket of its grain,
// and sums them by node and user as billingUsersSQL does, in its order:
// sorted by its GROUP BY's columns, stably (a group's rows stay in the
// primary key's order, as the engine sums them), and summed side by side.
func (s *Store) billingBucketUsers(ctx context.Context, sg segment) ([]billingGroup, error) {
	rows, err := s.query(ctx, s.r, billingRowsByGrain[sg.grain], sg.from)
	if err != nil {
		return nil, fmt.Errorf("store: billing: %w", err)
	}
	var rs []billingRow
	if err := eachRow(rows, "billing", func() error {
		var r billingRow
		var gi int64
		if err := rows.Scan(&r.node, &r.key, &gi, &r.model, &r.profile, &r.slices, &r.total,
			&r.first, &r.last, &r.sec, &r.busy, &r.energy); err != nil {
			return err
		}
		r.mig = gi >= 0
		rs = append(rs, r)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortStableFunc(rs, compareBillingRows)
	n := 0
	for i := range rs {
		if i == 0 || compareBillingRows(rs[i-1], rs[i]) != 0 {
			n++
		}
	}
	out := make([]billingGroup, 0, n)
	for i, r := range rs {
		if i > 0 && compareBillingRows(rs[i-1], r) == 0 {
			g := &out[len(out)-1]
			g.minLast, g.maxLast = min(g.minLast, r.first), max(g.maxLast, r.last)
			g.use.Seconds += r.sec
			g.use.BusySeconds += r.busy
			g.use.EnergyJoules += r.energy
			continue
		}
		out = append(out, billingGroup{seg: sg, node: r.node, key: r.key, minLast: r.first, maxLast: r.last,
			use: facts.InstanceUse{MIG: r.mig, Model: r.model, Profile: r.profile, Slices: r.slices, TotalSlices: r.total,
				Seconds: r.sec, BusySeconds: r.busy, EnergyJoules: r.energy}})
	}
	return out, nil
}

// compareBillingRows orders rows as billingUsersSQL's GROUP BY orders its
// groups: node, user key, kind of instance (whole GPUs first), model,
// profile, slices.
func compareBillingRows(a, b billingRow) int {
	return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.key, b.key), cmp.Compare(b2i(a.mig), b2i(b.mig)),
		cmp.Compare(a.model, b.model), cmp.Compare(a.profile, b.profile),
		cmp.Compare(a.slices, b.slices), cmp.Compare(a.total, b.total))
}
