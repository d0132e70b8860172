package store

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
		out = append(out, WriteStatement{Name: "billing buckets by " + g, SQL: s.bind(billingBucketsSQL(g)),
			Index:   idx("sqlite_autoindex_"+t+"_1", t+"_pkey"),
			Example: []any{from, to, "node-1", "u1", 0, "", "", 0, 0}})
	}
	return out
}

// ParseUserKeyForTest is parseUserKey.
func ParseUserKeyForTest(key string) (UserIdentity, bool) { return parseUserKey(key) }
