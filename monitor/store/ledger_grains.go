package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The books at fleet size (MONITOR.md 18): a window's whole UTC months are
// read from the month facts, the whole days left from the day facts and
// the rest from the hourly rows, all kept by the write path in one
// transaction (rollup_facts.go), so the three grains sum to the same
// figures. A user's sum whose ties differ across it (a registration
// started inside it) is read again one grain finer, down to the hours;
// where the finer rows are no longer kept (--hourly-retention), the
// coarser row is tied as a whole.

// grainPart is a part of a window read at one grain.
type grainPart struct {
	grain    string
	from, to int64
}

// grainParts cuts [from, to) (whole hours) into its whole months, then
// whole days, then hours, in time order.
func grainParts(from, to int64) []grainPart {
	var out []grainPart
	add := func(g string, a, b int64) {
		if b > a {
			out = append(out, grainPart{g, a, b})
		}
	}
	days := func(a, b int64) {
		d0, d1 := a+mod(-a, 86400), b-mod(b, 86400)
		if d0 >= d1 {
			add("hour", a, b)
			return
		}
		add("hour", a, d0)
		add("day", d0, d1)
		add("hour", d1, b)
	}
	m0, m1 := monthOf(from), monthOf(to)
	if m0 < from {
		m0 = time.Unix(m0, 0).UTC().AddDate(0, 1, 0).Unix()
	}
	if m0 >= m1 {
		days(from, to)
		return out
	}
	days(from, m0)
	add("month", m0, m1)
	days(m1, to)
	return out
}

// finer is the grain below g ("" below hours).
func finer(g string) string {
	switch g {
	case "month":
		return "day"
	case "day":
		return "hour"
	}
	return ""
}

// bucketEnd is the end of the bucket of grain g that starts at t.
func bucketEnd(g string, t int64) int64 {
	switch g {
	case "month":
		return time.Unix(t, 0).UTC().AddDate(0, 1, 0).Unix()
	case "day":
		return t + 86400
	}
	return t + 3600
}

// The ledger's sums at the coarser grains: each table's primary key
// (bucket first) serves the window.
var ledgerGrainSums = func() map[string][2]*stmt {
	out := map[string][2]*stmt{"hour": {stmtLedgerGPUSums, stmtLedgerUserSums}}
	for _, g := range []string{"day", "month"} {
		gt, ut := "node_gpu_"+g+"s", "node_user_"+g+"s"
		out[g] = [2]*stmt{
			{sql: `SELECT node, uuid, model, MIN(` + g + `), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
				FROM ` + gt + ` WHERE ` + g + ` >= ? AND ` + g + ` < ? GROUP BY node, uuid, model`,
				sqliteIndex: "sqlite_autoindex_" + gt + "_1", postgresIndex: gt + "_pkey", example: []any{int64(1796083200), int64(1796169600)}},
			{sql: `SELECT MIN(` + g + `), ` + userKeyColumns + `, MIN(first_time), MAX(last_time),
				SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
				FROM ` + ut + ` WHERE ` + g + ` >= ? AND ` + g + ` < ? GROUP BY node, uuid, gpu_instance_id, user_key, model, profile, slices, total_slices`,
				sqliteIndex: "sqlite_autoindex_" + ut + "_1", postgresIndex: ut + "_pkey", example: []any{int64(1796083200), int64(1796169600)}},
		}
	}
	return out
}()

// The ledger's rows of one whole bucket (a window that is exactly one
// hour, day or month, such as --month): each table holds one row per key
// and bucket already (its primary key), so they are read as they are
// stored, with no GROUP BY to sort and sum 300,000 users at fleet size for
// the same figures. The primary key (bucket first) serves each.
var ledgerGrainRows = func() map[string][2]*stmt {
	out := map[string][2]*stmt{}
	for _, g := range Grains {
		gt, ut := "node_gpu_"+g+"s", "node_user_"+g+"s"
		first := firstTimeColumn(g)
		out[g] = [2]*stmt{
			{sql: `SELECT node, uuid, model, ` + g + `, observed_s, unallocated_s, energy_j FROM ` + gt + ` WHERE ` + g + ` = ?`,
				sqliteIndex: "sqlite_autoindex_" + gt + "_1", postgresIndex: gt + "_pkey", example: []any{int64(1796130000)}},
			{sql: `SELECT ` + g + `, ` + userKeyColumns + `, ` + first + `, last_time,
				equal_s, util_s, busy_equal_s, busy_util_s, energy_j FROM ` + ut + ` WHERE ` + g + ` = ?`,
				sqliteIndex: "sqlite_autoindex_" + ut + "_1", postgresIndex: ut + "_pkey", example: []any{int64(1796130000)}},
		}
	}
	return out
}()

// ledgerUserIdentity: the identity columns of one user's rows of a part
// (as the sums grouped them), for a user_key that does not split back
// into them (a field holding the separator); each table's primary key.
var ledgerUserIdentity = func() map[string]*stmt {
	out := map[string]*stmt{}
	for _, g := range Grains {
		out[g] = &stmt{sql: `SELECT MIN(runtime), MIN(container_id), MIN(pod_uid), MIN(namespace), MIN(pod), MIN(container),
			MIN(slurm_job), MIN(uid), MIN(cgroup), MIN(declared), MIN(declared_task_id), MIN(declared_project), MIN(declared_owner)
			FROM node_user_` + g + `s WHERE ` + g + ` >= ? AND ` + g + ` < ? AND node = ? AND uuid = ? AND gpu_instance_id = ? AND user_key = ?
			AND model = ? AND profile = ? AND slices = ? AND total_slices = ?`,
			sqliteIndex: "sqlite_autoindex_node_user_" + g + "s_1", postgresIndex: "node_user_" + g + "s_pkey",
			example: []any{int64(1796130000), int64(1796133600), "n", "GPU-1", int64(-1), "k", "m", "", int64(0), int64(0)}}
	}
	return out
}()

// keyedUserHours reads st's user rows of the part p (userKeyColumns),
// each identity split back from its user_key, or where it does not split
// back read from its rows' columns (ledgerUserIdentity).
func (s *Store) keyedUserHours(ctx context.Context, st *stmt, p grainPart, args ...any) ([]UserHour, error) {
	var odd []int
	n := 0
	out, err := stmtRows(ctx, s, s.r, "ledger", st, func(rows *sql.Rows, u *UserHour) error {
		if err := rows.Scan(&u.Hour, &u.Node, &u.UUID, &u.GPUInstanceID, &u.Model, &u.Profile, &u.Slices, &u.Total, &u.key,
			&u.FirstTime, &u.LastTime, &u.Equal, &u.Util, &u.BusyEqual, &u.BusyUtil, &u.Energy); err != nil {
			return err
		}
		var ok bool
		if u.User, ok = parseUserKey(u.key); !ok {
			odd = append(odd, n)
		}
		n++
		return nil
	}, args...)
	if err != nil {
		return nil, err
	}
	for _, i := range odd {
		u := &out[i]
		var uid sql.NullInt64
		var decl int64
		id := &u.User
		if err := s.queryRow(ctx, s.r, ledgerUserIdentity[p.grain], p.from, p.to, u.Node, u.UUID, u.GPUInstanceID, u.key,
			u.Model, u.Profile, u.Slices, u.Total).Scan(&id.Runtime, &id.ContainerID, &id.PodUID, &id.Namespace, &id.Pod, &id.Container,
			&id.SlurmJob, &uid, &id.Cgroup, &decl, &id.DeclaredTaskID, &id.DeclaredProject, &id.DeclaredOwner); err != nil {
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		if uid.Valid {
			v := uid.Int64
			id.UID = &v
		}
		id.Declared = decl != 0
		// The key its identity makes, as for a row read with its columns.
		u.key = id.Key()
	}
	return out, nil
}

// oneBucket says whether p is one whole bucket of its grain.
func oneBucket(p grainPart) bool { return bucketEnd(p.grain, p.from) == p.to }

// stmtLedgerUserDays: one user's days (its month's finer rows); the day
// facts' primary key.
var stmtLedgerUserDays = &stmt{sql: `SELECT day, ` + userHourColumns + `, first_time, last_time,
	equal_s, util_s, busy_equal_s, busy_util_s, energy_j
	FROM node_user_days WHERE day >= ? AND day < ? AND node = ? AND uuid = ? AND gpu_instance_id = ? AND user_key = ?`,
	sqliteIndex: "sqlite_autoindex_node_user_days_1", postgresIndex: "node_user_days_pkey",
	example: []any{int64(1796083200), int64(1796169600), "n", "GPU-1", int64(-1), "k"}}

func init() {
	for g, sts := range ledgerGrainSums {
		if g != "hour" {
			nodeStatements["ledger GPU sums by "+g] = sts[0]
			nodeStatements["ledger user sums by "+g] = sts[1]
		}
	}
	nodeStatements["ledger user days"] = stmtLedgerUserDays
	for g, sts := range ledgerGrainRows {
		ledgerStatements["ledger GPU rows of one "+g] = sts[0]
		ledgerStatements["ledger user rows of one "+g] = sts[1]
		ledgerStatements["ledger user identity by "+g] = ledgerUserIdentity[g]
	}
}

// ledgerSums reads the GPUs' and users' sums of [from, to) (whole hours),
// each part at its grain: a part of one bucket its rows as stored.
func (s *Store) ledgerSums(ctx context.Context, from, to int64) ([]GPUHour, []UserHour, error) {
	var gpus []GPUHour
	var users []UserHour
	for _, p := range grainParts(from, to) {
		sts, args := ledgerGrainSums[p.grain], []any{p.from, p.to}
		if oneBucket(p) {
			sts, args = ledgerGrainRows[p.grain], []any{p.from}
		}
		g, err := stmtRows(ctx, s, s.r, "ledger", sts[0], func(rows *sql.Rows, g *GPUHour) error {
			return rows.Scan(&g.Node, &g.UUID, &g.Model, &g.Hour, &g.Observed, &g.Unallocated, &g.Energy)
		}, args...)
		if err != nil {
			return nil, nil, err
		}
		u, err := s.keyedUserHours(ctx, sts[1], p, args...)
		if err != nil {
			return nil, nil, err
		}
		for i := range u {
			u[i].Grain, u[i].Span = p.grain, [2]int64{p.from, p.to}
		}
		// A window of one part (a month) keeps its rows as read, not a
		// copy of them.
		if gpus == nil && users == nil {
			gpus, users = g, u
			continue
		}
		gpus, users = append(gpus, g...), append(users, u...)
	}
	return gpus, users, nil
}
