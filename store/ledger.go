package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/paddle-entrypoint/paddle-entrypoint/wire"
)

// GPULife is one life of a (node, GPU): it counts in the capacity from
// FirstStart until the earliest of EndedAt, LastEnd + --node-retire, now
// and the window's end.
type GPULife struct {
	Node, UUID, Model   string
	FirstStart, LastEnd int64
	EndedAt             *int64
}

// LedgerData is what the ledger of a window is computed from: the GPUs'
// lives that reach into it and the hourly roll-ups of its hours.
type LedgerData struct {
	Lives []GPULife
	GPUs  []GPUHour
	Users []UserHour
}

// Ledger SQL (reads; the window's hours are [from, to), whole hours).
// Each names the index that serves it.
const (
	// node_gpus_end: lives whose last covered instant is after the
	// window's start minus --node-retire.
	qLedgerLives = `SELECT node, uuid, model, first_start, last_end, ended_at FROM node_gpus
		WHERE last_end > ? AND first_start < ? ORDER BY node, uuid, first_start`
	// node_gpu_hours' primary key (hour first).
	qLedgerGPUHours = `SELECT hour, node, uuid, model, observed_s, unallocated_s, energy_j FROM node_gpu_hours
		WHERE hour >= ? AND hour < ? ORDER BY hour, node, uuid`
	// node_user_hours' primary key (hour first).
	qLedgerUserHours = `SELECT hour, node, uuid, gpu_instance_id, model, profile, slices, total_slices, runtime, container_id, pod_uid,
		namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id, declared_project, declared_owner, last_time,
		equal_s, util_s, busy_equal_s, busy_util_s, energy_j FROM node_user_hours
		WHERE hour >= ? AND hour < ? ORDER BY hour, node, uuid, gpu_instance_id, user_key`
	// node_reports_time: the raw reports whose span may reach into the
	// window (a span ends at or before its report's time).
	qLedgerRaw = `SELECT node, time, span_start, span_end, body FROM node_reports
		WHERE time > ? AND span_start < ? AND span_end > span_start ORDER BY node, time`
)

// LedgerData reads the lives and the hourly roll-ups of [from, to) (whole
// hours); retire is --node-retire.
func (s *Store) LedgerData(ctx context.Context, from, to, retire int64) (*LedgerData, error) {
	d := &LedgerData{}
	var err error
	if d.Lives, err = s.lives(ctx, from, to, retire); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, s.bind(qLedgerGPUHours), from, to)
	if err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	for rows.Next() {
		var g GPUHour
		if err := rows.Scan(&g.Hour, &g.Node, &g.UUID, &g.Model, &g.Observed, &g.Unallocated, &g.Energy); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		d.GPUs = append(d.GPUs, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, s.bind(qLedgerUserHours), from, to)
	if err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u UserHour
		var uid sql.NullInt64
		var decl int64
		if err := rows.Scan(&u.Hour, &u.Node, &u.UUID, &u.GPUInstanceID, &u.Model, &u.Profile, &u.Slices, &u.Total, &u.User.Runtime,
			&u.User.ContainerID, &u.User.PodUID, &u.User.Namespace, &u.User.Pod, &u.User.Container, &u.User.SlurmJob, &uid, &u.User.Cgroup,
			&decl, &u.User.DeclaredTaskID, &u.User.DeclaredProject, &u.User.DeclaredOwner, &u.LastTime,
			&u.Equal, &u.Util, &u.BusyEqual, &u.BusyUtil, &u.Energy); err != nil {
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		if uid.Valid {
			v := uid.Int64
			u.User.UID = &v
		}
		u.User.Declared = decl != 0
		d.Users = append(d.Users, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	return d, nil
}

func (s *Store) lives(ctx context.Context, from, to, retire int64) ([]GPULife, error) {
	rows, err := s.r.QueryContext(ctx, s.bind(qLedgerLives), from-retire, to)
	if err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	defer rows.Close()
	var out []GPULife
	for rows.Next() {
		var l GPULife
		var ended sql.NullInt64
		if err := rows.Scan(&l.Node, &l.UUID, &l.Model, &l.FirstStart, &l.LastEnd, &ended); err != nil {
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		if ended.Valid {
			v := ended.Int64
			l.EndedAt = &v
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// LedgerDataRaw is LedgerData computed from the raw reports instead of the
// stored roll-ups (each kept span rolled up again, the same way): the
// same answer while the raw reports of the window are kept.
func (s *Store) LedgerDataRaw(ctx context.Context, from, to, retire int64) (*LedgerData, error) {
	d := &LedgerData{}
	var err error
	if d.Lives, err = s.lives(ctx, from, to, retire); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, s.bind(qLedgerRaw), from, to)
	if err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	defer rows.Close()
	type gk struct {
		hour       int64
		node, uuid string
	}
	type uk struct {
		gk
		gi  int64
		key string
	}
	gi, ui := map[gk]int{}, map[uk]int{}
	for rows.Next() {
		var node, body string
		var t, a, b int64
		if err := rows.Scan(&node, &t, &a, &b, &body); err != nil {
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		var r nodeReportBody
		if err := json.Unmarshal([]byte(body), &r.NodeReport); err != nil {
			return nil, fmt.Errorf("store: ledger: the stored report of %s at %d: %w", node, t, err)
		}
		gpus, users := Rollup(&r.NodeReport, a, b)
		for _, g := range gpus {
			if g.Hour < from || g.Hour >= to {
				continue
			}
			k := gk{g.Hour, g.Node, g.UUID}
			if i, ok := gi[k]; ok {
				d.GPUs[i].Observed += g.Observed
				d.GPUs[i].Unallocated += g.Unallocated
				d.GPUs[i].Energy += g.Energy
				d.GPUs[i].Model = g.Model
				continue
			}
			gi[k] = len(d.GPUs)
			d.GPUs = append(d.GPUs, g)
		}
		for _, u := range users {
			if u.Hour < from || u.Hour >= to {
				continue
			}
			k := uk{gk{u.Hour, u.Node, u.UUID}, u.GPUInstanceID, u.User.Key()}
			if i, ok := ui[k]; ok {
				x := &d.Users[i]
				x.Equal += u.Equal
				x.Util += u.Util
				x.BusyEqual += u.BusyEqual
				x.BusyUtil += u.BusyUtil
				x.Energy += u.Energy
				x.LastTime = max(x.LastTime, u.LastTime)
				continue
			}
			ui[k] = len(d.Users)
			d.Users = append(d.Users, u)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	sort.SliceStable(d.GPUs, func(i, j int) bool {
		a, b := d.GPUs[i], d.GPUs[j]
		if a.Hour != b.Hour {
			return a.Hour < b.Hour
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.UUID < b.UUID
	})
	sort.SliceStable(d.Users, func(i, j int) bool {
		a, b := d.Users[i], d.Users[j]
		if a.Hour != b.Hour {
			return a.Hour < b.Hour
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.UUID != b.UUID {
			return a.UUID < b.UUID
		}
		if a.GPUInstanceID != b.GPUInstanceID {
			return a.GPUInstanceID < b.GPUInstanceID
		}
		return a.User.Key() < b.User.Key()
	})
	return d, nil
}

type nodeReportBody struct{ NodeReport wire.NodeReport }

// Tie is a registration a user of a node report may be tied to.
type Tie struct {
	Key                    int64 // tasks.id
	TaskID, Project, Owner string
	StartTime              int64
}

// TieCandidates returns the registrations the user of node may be tied to
// (docs/cost.md, "The ledger"), oldest first: on Kubernetes (a pod UID)
// those whose k8s_pod_uid is the user's, whatever it declared; for a Slurm
// job the node's registrations of that job; for another container with a
// declaration, the declared task of that project (and owner, when
// declared) whose hostname is the container's default host name (the
// first 12 characters of its ID) or whose k8s_node is the node. None for
// host users.
func (s *Store) TieCandidates(ctx context.Context, node string, u *UserIdentity) ([]Tie, error) {
	return s.tieCandidates(ctx, s.r, node, u)
}

func (s *Store) tieCandidates(ctx context.Context, q querier, node string, u *UserIdentity) ([]Tie, error) {
	var st *stmt
	var args []any
	switch {
	case u.PodUID != "":
		st, args = stmtTiePod, []any{u.PodUID}
	case u.SlurmJob != "":
		st, args = stmtTieSlurm, []any{u.SlurmJob, node, node}
	case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
		host := u.ContainerID
		if len(host) > 12 {
			host = host[:12]
		}
		st, args = stmtTieContainer, []any{u.DeclaredTaskID, u.DeclaredProject, u.DeclaredOwner, u.DeclaredOwner, host, node}
	default:
		return nil, nil
	}
	out, err := s.ties(ctx, q, st, args...)
	if err != nil || st != stmtTieSlurm {
		return out, err
	}
	// A registration without slurm_job names its job as pipeline_run.
	more, err := s.ties(ctx, q, stmtTieSlurmRun, args...)
	if err != nil {
		return nil, err
	}
	seen := map[int64]bool{}
	for _, t := range out {
		seen[t.Key] = true
	}
	for _, t := range more {
		if !seen[t.Key] {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].StartTime != out[j].StartTime {
			return out[i].StartTime < out[j].StartTime
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

func (s *Store) ties(ctx context.Context, q querier, st *stmt, args ...any) ([]Tie, error) {
	rows, err := s.query(ctx, q, st, args...)
	if err != nil {
		return nil, fmt.Errorf("store: ledger ties: %w", err)
	}
	defer rows.Close()
	var out []Tie
	for rows.Next() {
		var t Tie
		if err := rows.Scan(&t.Key, &t.TaskID, &t.Project, &t.Owner, &t.StartTime); err != nil {
			return nil, fmt.Errorf("store: ledger ties: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeclaredTask is a registered task as the discrepancies compare it with
// what the nodes observed: its declared GPUs (share of each listed GPU,
// and the unlisted ones at 1).
type DeclaredTask struct {
	Key                                       int64
	TaskID, Project, Owner, Hostname, K8sNode string
	Start                                     int64
	End                                       *int64
	Unlisted                                  int64
	GPUs                                      []DeclaredGPU
}

// DeclaredGPU is one listed GPU of a task.
type DeclaredGPU struct {
	UUID          string
	GPUInstanceID *int64
	Share         float64
}

// qDeclaredTasks: the tasks whose interval reaches into [from, to), with
// their listed GPUs (tasks_start_time bounds the scan; task_gpus' primary
// key joins). A completed task's end is its counted end, max(end_time,
// last_seen).
const qDeclaredTasks = `SELECT t.id, t.task_id, t.project, t.owner, t.hostname, t.k8s_node, t.start_time,
	CASE WHEN t.end_time IS NOT NULL AND t.last_seen > t.end_time THEN t.last_seen ELSE t.end_time END, t.gpu_unlisted,
	g.uuid, g.gpu_instance_id, g.share
	FROM tasks t LEFT JOIN task_gpus g ON g.task_key = t.id
	WHERE t.start_time < ? AND (t.end_time IS NULL OR t.end_time > ? OR t.last_seen > ?) ORDER BY t.id, g.position`

// DeclaredTasks lists the tasks whose counted interval reaches into
// [from, to).
func (s *Store) DeclaredTasks(ctx context.Context, from, to int64) ([]DeclaredTask, error) {
	rows, err := s.r.QueryContext(ctx, s.bind(qDeclaredTasks), to, from, from)
	if err != nil {
		return nil, fmt.Errorf("store: declared tasks: %w", err)
	}
	defer rows.Close()
	var out []DeclaredTask
	for rows.Next() {
		var t DeclaredTask
		var end, gi sql.NullInt64
		var uuid sql.NullString
		var share sql.NullFloat64
		if err := rows.Scan(&t.Key, &t.TaskID, &t.Project, &t.Owner, &t.Hostname, &t.K8sNode, &t.Start, &end, &t.Unlisted,
			&uuid, &gi, &share); err != nil {
			return nil, fmt.Errorf("store: declared tasks: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].Key != t.Key {
			if end.Valid {
				v := end.Int64
				t.End = &v
			}
			out = append(out, t)
		}
		if uuid.Valid {
			g := DeclaredGPU{UUID: uuid.String, Share: 1}
			if share.Valid {
				g.Share = share.Float64
			}
			if gi.Valid {
				v := gi.Int64
				g.GPUInstanceID = &v
			}
			last := &out[len(out)-1]
			last.GPUs = append(last.GPUs, g)
		}
	}
	return out, rows.Err()
}
