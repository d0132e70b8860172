package store

// Day and month facts (migration 0017, docs/cost.md "Facts at three
// grains"): the node-report write path keeps them in the transaction that
// keeps the hourly rows, from the same roll-up of the kept span, so the
// hours, days and months of a store always sum to the same figures. A
// report (early, late or re-rolled by a conflict) writes only the buckets
// its kept span touches; RollupBuckets counts them per grain.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Grains are the roll-ups' grains, in the order of RollupBuckets.
var Grains = []string{"hour", "day", "month"}

// firstTimeColumn is the column of a user row's earliest report time at
// grain: a day's or month's first_time; an hourly row keeps only its last
// one, which is its earliest too (MIN(last_time) over the hours).
func firstTimeColumn(grain string) string {
	if grain == "hour" {
		return "last_time"
	}
	return "first_time"
}

// rollupCounts counts the buckets written per grain (hour, day, month).
type rollupCounts [3]atomic.Int64

// RollupBuckets returns the buckets (rows of a roll-up table, per GPU or
// per GPU instance and user) this process's write paths have written, per
// grain in the order of Grains (paddle_monitor_rollup_buckets_written_total).
func (s *Store) RollupBuckets() map[string]int64 {
	out := make(map[string]int64, len(Grains))
	for i, g := range Grains {
		out[g] = s.rollups[i].Load()
	}
	return out
}

var (
	stmtUpsertGPUDay    = gpuFactUpsert("day", 1)
	stmtUpsertGPUMonth  = gpuFactUpsert("month", 1)
	stmtUpsertUserDay   = userFactUpsert("day", 1)
	stmtUpsertUserMonth = userFactUpsert("month", 1)
)

// factRows are the row counts of the multi-row fact upserts, largest
// first: a report's rows of one table go in as few statements as the
// binary digits of their count (one for the 8 GPUs and the 16 users of an
// hour), each a prepared statement of the registry. 64 rows of a user
// table are 1,856 parameters, far below SQLite's 32,766 and PostgreSQL's
// 65,535.
var factRows = []int{64, 32, 16, 8, 4, 2, 1}

// factUpserts are the fact upserts by table (GPUs then users, per grain
// in the order of Grains) and by row count (factRows' order).
var factUpserts = func() [2][3][]*stmt {
	var out [2][3][]*stmt
	for i, g := range Grains {
		for _, n := range factRows {
			gs, us := gpuFactUpsert(g, n), userFactUpsert(g, n)
			if n == 1 {
				gs, us = []*stmt{stmtUpsertGPUHour, stmtUpsertGPUDay, stmtUpsertGPUMonth}[i],
					[]*stmt{stmtUpsertUserHour, stmtUpsertUserDay, stmtUpsertUserMonth}[i]
			}
			out[0][i], out[1][i] = append(out[0][i], gs), append(out[1][i], us)
		}
	}
	return out
}()

// The multi-row upserts are on the node-report write path (prepared,
// plan-checked with it).
func init() {
	for i, g := range Grains {
		for k, n := range factRows {
			if n > 1 {
				nodeStatements[fmt.Sprintf("upsert GPU %s, %d rows", g, n)] = factUpserts[0][i][k]
				nodeStatements[fmt.Sprintf("upsert user %s, %d rows", g, n)] = factUpserts[1][i][k]
			}
		}
	}
}

// valueRows is the VALUES list of rows rows of cols parameters each.
func valueRows(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+",\n\t\t", rows), ",\n\t\t")
}

// exampleRows repeats a one-row example rows times, each row in its own
// bucket (its first argument: the bucket's start), as EXPLAIN needs them.
func exampleRows(one []any, rows int) []any {
	out := make([]any, 0, len(one)*rows)
	for r := range rows {
		out = append(out, int64(r)*3600)
		out = append(out, one[1:]...)
	}
	return out
}

// gpuFactUpsert is the upsert of rows GPU rows into grain's table
// (node_gpu_hours, node_gpu_days, node_gpu_months): the bucket's primary
// key serves the conflict, whose figures add up. The rows of one
// statement have distinct keys (mergeGPUs): PostgreSQL refuses to update
// one row twice.
func gpuFactUpsert(grain string, rows int) *stmt {
	t := "node_gpu_" + grain + "s"
	return &stmt{sql: `INSERT INTO ` + t + ` (` + grain + `, node, uuid, model, observed_s, unallocated_s, energy_j)
		VALUES ` + valueRows(rows, 7) + `
		ON CONFLICT (` + grain + `, node, uuid) DO UPDATE SET observed_s = ` + t + `.observed_s + excluded.observed_s,
		unallocated_s = ` + t + `.unallocated_s + excluded.unallocated_s, energy_j = ` + t + `.energy_j + excluded.energy_j,
		model = excluded.model`,
		postgresIndex: t + "_pkey",
		example:       exampleRows([]any{int64(0), "n", "GPU-1", "m", 1.5, 0.5, 0.0}, rows)}
}

// userFactUpsert is the same for rows user rows (node_user_hours, …),
// keeping each bucket's latest report time and, at a day's or a month's
// grain, its earliest beside it (first_time: the hourly table has none).
func userFactUpsert(grain string, rows int) *stmt {
	t := "node_user_" + grain + "s"
	first, firstSet, cols := "", "", 28
	example := []any{int64(0), "n", "GPU-1", int64(-1), "k", "m", "", int64(0), int64(0), "", "", "", "", "", "", "", nil, "",
		int64(0), "", "", "", int64(1), 1.5, 1.5, 0.5, 0.5, 0.0}
	if grain != "hour" {
		first, cols = "first_time, ", 29
		firstSet = `first_time = CASE WHEN ` + t + `.first_time > excluded.first_time THEN excluded.first_time ELSE ` + t + `.first_time END,
		`
		example = append(append(append([]any{}, example[:22]...), int64(1)), example[22:]...)
	}
	return &stmt{sql: `INSERT INTO ` + t + ` (` + grain + `, node, uuid, gpu_instance_id, user_key, model, profile, slices,
		total_slices, runtime, container_id, pod_uid, namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id,
		declared_project, declared_owner, ` + first + `last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
		VALUES ` + valueRows(rows, cols) + `
		ON CONFLICT (` + grain + `, node, uuid, gpu_instance_id, user_key) DO UPDATE SET
		` + firstSet + `last_time = CASE WHEN ` + t + `.last_time < excluded.last_time THEN excluded.last_time ELSE ` + t + `.last_time END,
		equal_s = ` + t + `.equal_s + excluded.equal_s, util_s = ` + t + `.util_s + excluded.util_s,
		busy_equal_s = ` + t + `.busy_equal_s + excluded.busy_equal_s, busy_util_s = ` + t + `.busy_util_s + excluded.busy_util_s,
		energy_j = ` + t + `.energy_j + excluded.energy_j`,
		postgresIndex: t + "_pkey",
		example:       exampleRows(example, rows)}
}

// dayOf and monthOf are the first second of the UTC day and month of t.
func dayOf(t int64) int64 { return t - ((t%86400)+86400)%86400 }

func monthOf(t int64) int64 {
	u := time.Unix(t, 0).UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
}

// keepFacts writes a roll-up's hours and their day and month facts (sign
// -1: takes them back, a conflict's re-roll), each bucket once, each
// table's rows in as few multi-row upserts as factRows allow.
func (s *Store) keepFacts(ctx context.Context, q querier, gpus []GPUHour, users []UserHour, sign float64) error {
	for i, bucket := range []func(int64) int64{func(h int64) int64 { return h }, dayOf, monthOf} {
		gs, us := mergeGPUs(gpus, bucket), mergeUsers(users, bucket)
		args := make([][]any, 0, len(gs))
		for _, g := range gs {
			args = append(args, []any{g.Hour, g.Node, g.UUID, g.Model, sign * g.Observed, sign * g.Unallocated, sign * g.Energy})
		}
		if err := s.upsertRows(ctx, q, factUpserts[0][i], args); err != nil {
			return err
		}
		args = make([][]any, 0, len(us))
		for k := range us {
			u := us[k]
			u.Equal, u.Util, u.BusyEqual, u.BusyUtil, u.Energy = sign*u.Equal, sign*u.Util, sign*u.BusyEqual, sign*u.BusyUtil, sign*u.Energy
			row := userHourArgs(&u)
			if i > 0 {
				// first_time before last_time (the coarser tables' column order).
				row = append(append(append(make([]any, 0, len(row)+1), row[:22]...), u.FirstTime), row[22:]...)
			}
			args = append(args, row)
		}
		if err := s.upsertRows(ctx, q, factUpserts[1][i], args); err != nil {
			return err
		}
		s.rollups[i].Add(int64(len(gs) + len(us)))
	}
	return nil
}

// upsertRows runs the rows of rows through sts (one statement per count
// of factRows): the largest that fits, as often as it fits, then the
// smaller ones.
func (s *Store) upsertRows(ctx context.Context, q querier, sts []*stmt, rows [][]any) error {
	for k, n := range factRows {
		for len(rows) >= n {
			var args []any
			for _, r := range rows[:n] {
				args = append(args, r...)
			}
			if _, err := s.exec(ctx, q, sts[k], args...); err != nil {
				return err
			}
			rows = rows[n:]
		}
	}
	return nil
}

// mergeGPUs sums a roll-up's GPU hours into buckets (Hour: the bucket's
// first second), in the order of their first hour.
func mergeGPUs(gpus []GPUHour, bucket func(int64) int64) []GPUHour {
	return mergeBuckets(gpus, func(g *GPUHour) string {
		g.Hour = bucket(g.Hour)
		return strings.Join([]string{strconv.FormatInt(g.Hour, 10), g.Node, g.UUID}, "\x1e")
	}, (*GPUHour).add)
}

// mergeUsers sums a roll-up's user hours into buckets, keeping the
// earliest (FirstTime) and latest (LastTime) report time of each.
func mergeUsers(users []UserHour, bucket func(int64) int64) []UserHour {
	return mergeBuckets(users, func(u *UserHour) string {
		u.Hour = bucket(u.Hour)
		u.FirstTime = u.LastTime
		return strings.Join([]string{strconv.FormatInt(u.Hour, 10), u.Node, u.UUID, strconv.FormatInt(u.GPUInstanceID, 10), u.User.Key()}, "\x1e")
	}, func(o *UserHour, u UserHour) {
		o.FirstTime, o.LastTime = min(o.FirstTime, u.LastTime), max(o.LastTime, u.LastTime)
		o.add(u)
	})
}

// mergeBuckets merges rows that fall in one bucket, in the order of each
// bucket's first row: key moves a row to its bucket and returns the
// bucket's key, add sums a later row of a bucket into its first.
func mergeBuckets[R any](rows []R, key func(*R) string, add func(first *R, r R)) []R {
	var out []R
	idx := map[string]int{}
	for _, r := range rows {
		k := key(&r)
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, r)
			continue
		}
		add(&out[i], r)
	}
	return out
}

// ErrUnknownGrain: a grain other than those of Grains.
var ErrUnknownGrain = errors.New("store: unknown roll-up grain")

// FactSum is a window's sum of one roll-up row's figures at one grain: a
// GPU's (UserKey "", GPUInstanceID -1, users' figures 0) or a GPU instance
// user's (GPU figures 0).
type FactSum struct {
	Node, UUID                       string
	GPUInstanceID                    int64
	UserKey                          string
	Observed, Unallocated            float64
	Equal, Util, BusyEqual, BusyUtil float64
	Energy                           float64
}

// factSums are the statements of FactSums per grain: the primary key of
// each table (bucket first) serves the window.
var factSums = func() map[string][2]*stmt {
	out := map[string][2]*stmt{}
	for _, g := range Grains {
		gt, ut := "node_gpu_"+g+"s", "node_user_"+g+"s"
		sqliteG, sqliteU := "sqlite_autoindex_"+gt+"_1", "sqlite_autoindex_"+ut+"_1"
		out[g] = [2]*stmt{
			{sql: `SELECT node, uuid, SUM(observed_s), SUM(unallocated_s), SUM(energy_j) FROM ` + gt +
				` WHERE ` + g + ` >= ? AND ` + g + ` < ? GROUP BY node, uuid`,
				sqliteIndex: sqliteG, postgresIndex: gt + "_pkey", example: []any{int64(0), int64(3600)}},
			{sql: `SELECT node, uuid, gpu_instance_id, user_key, SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s),
				SUM(energy_j) FROM ` + ut + ` WHERE ` + g + ` >= ? AND ` + g + ` < ? GROUP BY node, uuid, gpu_instance_id, user_key`,
				sqliteIndex: sqliteU, postgresIndex: ut + "_pkey", example: []any{int64(0), int64(3600)}},
		}
	}
	return out
}()

// FactSums sums the roll-up rows of grain ("hour", "day" or "month")
// whose bucket starts in [from, to): the GPUs' rows, then the users'.
// A window of whole buckets of the grain gets the same figures at every
// finer grain (the write path keeps them in one transaction).
func (s *Store) FactSums(ctx context.Context, grain string, from, to int64) ([]FactSum, error) {
	sts, ok := factSums[grain]
	if !ok {
		return nil, fmt.Errorf("store: facts: %w: %q", ErrUnknownGrain, grain)
	}
	gpus, err := stmtRows(ctx, s, s.r, "facts", sts[0], func(rows *sql.Rows, f *FactSum) error {
		f.GPUInstanceID = -1
		return rows.Scan(&f.Node, &f.UUID, &f.Observed, &f.Unallocated, &f.Energy)
	}, from, to)
	if err != nil {
		return nil, err
	}
	users, err := stmtRows(ctx, s, s.r, "facts", sts[1], func(rows *sql.Rows, f *FactSum) error {
		return rows.Scan(&f.Node, &f.UUID, &f.GPUInstanceID, &f.UserKey, &f.Equal, &f.Util, &f.BusyEqual, &f.BusyUtil, &f.Energy)
	}, from, to)
	if err != nil {
		return nil, err
	}
	return append(gpus, users...), nil
}
