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
	stmtUpsertGPUDay    = gpuFactUpsert("day")
	stmtUpsertGPUMonth  = gpuFactUpsert("month")
	stmtUpsertUserDay   = userFactUpsert("day")
	stmtUpsertUserMonth = userFactUpsert("month")
)

// gpuFactUpsert is stmtUpsertGPUHour at a coarser grain: the bucket's
// primary key serves the conflict.
func gpuFactUpsert(grain string) *stmt {
	t := "node_gpu_" + grain + "s"
	return &stmt{sql: `INSERT INTO ` + t + ` (` + grain + `, node, uuid, model, observed_s, unallocated_s, energy_j)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (` + grain + `, node, uuid) DO UPDATE SET observed_s = ` + t + `.observed_s + excluded.observed_s,
		unallocated_s = ` + t + `.unallocated_s + excluded.unallocated_s, energy_j = ` + t + `.energy_j + excluded.energy_j,
		model = excluded.model`,
		postgresIndex: t + "_pkey",
		example:       []any{int64(0), "n", "GPU-1", "m", 1.5, 0.5, 0.0}}
}

// userFactUpsert is stmtUpsertUserHour at a coarser grain, keeping the
// bucket's earliest report time beside its latest.
func userFactUpsert(grain string) *stmt {
	t := "node_user_" + grain + "s"
	return &stmt{sql: `INSERT INTO ` + t + ` (` + grain + `, node, uuid, gpu_instance_id, user_key, model, profile, slices,
		total_slices, runtime, container_id, pod_uid, namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id,
		declared_project, declared_owner, first_time, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (` + grain + `, node, uuid, gpu_instance_id, user_key) DO UPDATE SET
		first_time = CASE WHEN ` + t + `.first_time > excluded.first_time THEN excluded.first_time ELSE ` + t + `.first_time END,
		last_time = CASE WHEN ` + t + `.last_time < excluded.last_time THEN excluded.last_time ELSE ` + t + `.last_time END,
		equal_s = ` + t + `.equal_s + excluded.equal_s, util_s = ` + t + `.util_s + excluded.util_s,
		busy_equal_s = ` + t + `.busy_equal_s + excluded.busy_equal_s, busy_util_s = ` + t + `.busy_util_s + excluded.busy_util_s,
		energy_j = ` + t + `.energy_j + excluded.energy_j`,
		postgresIndex: t + "_pkey",
		example: []any{int64(0), "n", "GPU-1", int64(-1), "k", "m", "", int64(0), int64(0), "", "", "", "", "", "", "", nil, "",
			int64(0), "", "", "", int64(1), int64(1), 1.5, 1.5, 0.5, 0.5, 0.0}}
}

// dayOf and monthOf are the first second of the UTC day and month of t.
func dayOf(t int64) int64 { return t - ((t%86400)+86400)%86400 }

func monthOf(t int64) int64 {
	u := time.Unix(t, 0).UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
}

// keepFacts writes a roll-up's hours and their day and month facts (sign
// -1: takes them back, a conflict's re-roll), each bucket once.
func (s *Store) keepFacts(ctx context.Context, q querier, gpus []GPUHour, users []UserHour, sign float64) error {
	hourGPU, hourUser := stmtUpsertGPUHour, stmtUpsertUserHour
	for i, bucket := range []func(int64) int64{func(h int64) int64 { return h }, dayOf, monthOf} {
		gs, us := mergeGPUs(gpus, bucket), mergeUsers(users, bucket)
		stG, stU := []*stmt{hourGPU, stmtUpsertGPUDay, stmtUpsertGPUMonth}[i], []*stmt{hourUser, stmtUpsertUserDay, stmtUpsertUserMonth}[i]
		for _, g := range gs {
			if _, err := s.exec(ctx, q, stG, g.Hour, g.Node, g.UUID, g.Model, sign*g.Observed, sign*g.Unallocated, sign*g.Energy); err != nil {
				return err
			}
		}
		for k := range us {
			u := us[k]
			u.Equal, u.Util, u.BusyEqual, u.BusyUtil, u.Energy = sign*u.Equal, sign*u.Util, sign*u.BusyEqual, sign*u.BusyUtil, sign*u.Energy
			args := userHourArgs(&u)
			if i > 0 {
				// first_time before last_time (the coarser tables' column order).
				args = append(append(append([]any{}, args[:22]...), u.FirstTime), args[22:]...)
			}
			if _, err := s.exec(ctx, q, stU, args...); err != nil {
				return err
			}
		}
		s.rollups[i].Add(int64(len(gs) + len(us)))
	}
	return nil
}

// mergeGPUs sums a roll-up's GPU hours into buckets (Hour: the bucket's
// first second), in the order of their first hour.
func mergeGPUs(gpus []GPUHour, bucket func(int64) int64) []GPUHour {
	return mergeBuckets(gpus, func(g *GPUHour) string {
		g.Hour = bucket(g.Hour)
		return strings.Join([]string{strconv.FormatInt(g.Hour, 10), g.Node, g.UUID}, "\x1e")
	}, func(o *GPUHour, g GPUHour) {
		o.Observed += g.Observed
		o.Unallocated += g.Unallocated
		o.Energy += g.Energy
		o.Model = g.Model
	})
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
		o.Equal += u.Equal
		o.Util += u.Util
		o.BusyEqual += u.BusyEqual
		o.BusyUtil += u.BusyUtil
		o.Energy += u.Energy
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
