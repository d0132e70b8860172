package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// BillingStatementsForTest lists the reads of billing from observations
// over the roll-ups (billing.go) with the index each names, written out
// for the window [from, to).
func BillingStatementsForTest(s *Store, from, to int64) []WriteStatement {
	idx := func(sqlite, postgres string) string {
		if s.dialect == Postgres {
			return postgres
		}
		return sqlite
	}
	out := []WriteStatement{
		{Name: "billing users", SQL: s.bind(billingUsersSQL("hour", hourPart(from, to))),
			Index: idx("sqlite_autoindex_node_user_hours_1", "node_user_hours_pkey"), Example: []any{from, to}},
		{Name: "billing user times", SQL: s.bind(billingUserTimesSQL(hourPart(from, to))),
			Index:   idx("sqlite_autoindex_node_user_hours_1", "node_user_hours_pkey"),
			Example: []any{from, to, "node-1", "u1", 0, "", "", 0, 0}},
		{Name: "billing untied hours", SQL: s.bind(billingUntiedHoursSQL(hourPart(from, to))),
			Index:   idx("sqlite_autoindex_node_user_hours_1", "node_user_hours_pkey"),
			Example: []any{from, to, "node-1", "u1", 0, "", "", 0, 0}},
		{Name: "billing identity", SQL: s.bind(stmtBillingIdentity.sql),
			Index: idx("sqlite_autoindex_node_user_hours_1", "node_user_hours_pkey"), Example: []any{from, to, "node-1", "u1"}},
		{Name: "billing spans", SQL: s.bind(stmtSpansIn.sql),
			Index: idx("node_spans_end", "node_spans_end"), Example: []any{from, to + 86400, to}},
	}
	for _, g := range Grains {
		t := "node_user_" + g + "s"
		if g != "hour" {
			out = append(out, WriteStatement{Name: "billing users by " + g, SQL: s.bind(billingUsersSQL(g, "")),
				Index: idx("sqlite_autoindex_"+t+"_1", t+"_pkey"), Example: []any{from, to}})
		}
		out = append(out, WriteStatement{Name: "billing user rows of one " + g, SQL: s.bind(billingRowsSQL(g)),
			Index: idx("sqlite_autoindex_"+t+"_1", t+"_pkey"), Example: []any{from}})
		out = append(out, WriteStatement{Name: "billing buckets by " + g, SQL: s.bind(billingBucketsSQL(g)),
			Index:   idx("sqlite_autoindex_"+t+"_1", t+"_pkey"),
			Example: []any{from, to, "node-1", "u1", 0, "", "", 0, 0}})
	}
	return out
}

// ParseUserKeyForTest is parseUserKey.
func ParseUserKeyForTest(key string) (UserIdentity, bool) { return parseUserKey(key) }

// UntiedBothWaysForTest reads the untied users' use of [from, to) (whole
// hours) user by user (untiedHours) and in one pass (untiedPass), and
// returns both as text, by GPU instance and hour.
func UntiedBothWaysForTest(ctx context.Context, s *Store, from, to int64) (byUser, onePass string, err error) {
	sg := segment{grain: "hour", from: from, to: to}
	groups, err := s.billingUsers(ctx, sg)
	if err != nil {
		return "", "", err
	}
	users := make([]UserHour, len(groups))
	for i := range groups {
		users[i] = UserHour{Node: groups[i].node, User: groups[i].user}
	}
	ties, err := s.LedgerTies(ctx, users)
	if err != nil {
		return "", "", err
	}
	var untiedGroups []billingGroup
	for _, g := range groups {
		if len(ties[TieKey(g.node, &g.user)]) == 0 {
			untiedGroups = append(untiedGroups, g)
		}
	}
	a, b := untied{}, untied{}
	for _, g := range untiedGroups {
		if err := s.untiedHours(ctx, sg, g, a); err != nil {
			return "", "", err
		}
	}
	if err := s.untiedPass(ctx, sg, untiedGroups, b); err != nil {
		return "", "", err
	}
	return a.String(), b.String(), nil
}

// String lists u by GPU instance and hour, each hour's entries in order.
func (u untied) String() string {
	var lines []string
	for k, hours := range u {
		for h, es := range hours {
			for _, e := range es {
				lines = append(lines, fmt.Sprintf("%s/%s/%d %d %s %.6f %d", k.node, k.uuid, k.instance, h, e.namespace, e.left, e.last))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// BillingBucketBothWaysForTest reads the users of the bucket of grain
// that starts at from grouped in SQL (billingUsersSQL) and from its rows
// as stored (billingBucketUsers), and returns both as text, a group a
// line in the order read.
func BillingBucketBothWaysForTest(ctx context.Context, s *Store, grain string, from int64) (grouped, rows string, err error) {
	sg := segment{grain: grain, from: from, to: bucketEnd(grain, from)}
	text := func(gs []billingGroup) string {
		var lines []string
		for _, g := range gs {
			u := g.use
			lines = append(lines, fmt.Sprintf("%s %s mig=%v %s/%s %d/%d %d-%d %g %g %g", g.node, g.key, u.MIG, u.Model, u.Profile,
				u.Slices, u.TotalSlices, g.minLast, g.maxLast, u.Seconds, u.BusySeconds, u.EnergyJoules))
		}
		return strings.Join(lines, "\n")
	}
	a, err := builtRows(ctx, s, s.r, "billing", billingUsersByGrain[grain], billingUsersSQL(grain, ""), func(rows *sql.Rows, g *billingGroup) error {
		var mig int64
		err := rows.Scan(&g.node, &g.key, &mig, &g.use.Model, &g.use.Profile, &g.use.Slices, &g.use.TotalSlices,
			&g.minLast, &g.maxLast, &g.use.Seconds, &g.use.BusySeconds, &g.use.EnergyJoules)
		g.use.MIG = mig == 1
		return err
	}, sg.from, sg.to)
	if err != nil {
		return "", "", err
	}
	b, err := s.billingBucketUsers(ctx, sg)
	if err != nil {
		return "", "", err
	}
	return text(a), text(b), nil
}

// BindForTest is q with the store's placeholders.
func BindForTest(s *Store, q string) string { return s.bind(q) }
