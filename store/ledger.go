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
	// qLedgerRaw: node_reports_time: the raw reports whose span may reach
	// into the window (a span ends at or before its report's time).
	qLedgerRaw = `SELECT node, time, span_start, span_end, body FROM node_reports
		WHERE time > ? AND span_start < ? AND span_end > span_start ORDER BY node, time`
)

// LedgerData reads the lives and the hourly roll-ups of [from, to) (whole
// hours) summed over the window in SQL: one GPUHour per (node, GPU,
// model), Hour its first hour, and one UserHour per (node, GPU instance,
// user, model, profile, slices), FirstTime and LastTime the earliest and
// the latest of its hours' last report times; retire is --node-retire.
func (s *Store) LedgerData(ctx context.Context, from, to, retire int64) (*LedgerData, error) {
	d := &LedgerData{}
	var err error
	if d.Lives, err = s.lives(ctx, from, to, retire); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.r, stmtLedgerGPUSums, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	for rows.Next() {
		var g GPUHour
		if err := rows.Scan(&g.Node, &g.UUID, &g.Model, &g.Hour, &g.Observed, &g.Unallocated, &g.Energy); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		d.GPUs = append(d.GPUs, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	sort.SliceStable(d.GPUs, func(i, j int) bool { return gpuHourLess(&d.GPUs[i], &d.GPUs[j]) })
	if d.Users, err = s.userHours(ctx, stmtLedgerUserSums, from, to); err != nil {
		return nil, err
	}
	return d, nil
}

// LedgerUserHours reads the hourly roll-ups of [from, to) of one user of
// a GPU instance (u's node, UUID, instance, identity, model, profile and
// slices), hour by hour: where a sum of LedgerData spans a change of the
// registration its user is tied to.
func (s *Store) LedgerUserHours(ctx context.Context, from, to int64, u *UserHour) ([]UserHour, error) {
	all, err := s.userHours(ctx, stmtLedgerUserHours, from, to, u.Node, u.UUID, u.GPUInstanceID, u.User.Key())
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, h := range all {
		if h.Model == u.Model && h.Profile == u.Profile && h.Slices == u.Slices && h.Total == u.Total {
			out = append(out, h)
		}
	}
	return out, nil
}

func (s *Store) userHours(ctx context.Context, st *stmt, args ...any) ([]UserHour, error) {
	rows, err := s.query(ctx, s.r, st, args...)
	if err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	defer rows.Close()
	var out []UserHour
	for rows.Next() {
		var u UserHour
		var uid sql.NullInt64
		var decl int64
		if err := rows.Scan(&u.Hour, &u.Node, &u.UUID, &u.GPUInstanceID, &u.Model, &u.Profile, &u.Slices, &u.Total, &u.User.Runtime,
			&u.User.ContainerID, &u.User.PodUID, &u.User.Namespace, &u.User.Pod, &u.User.Container, &u.User.SlurmJob, &uid, &u.User.Cgroup,
			&decl, &u.User.DeclaredTaskID, &u.User.DeclaredProject, &u.User.DeclaredOwner, &u.FirstTime, &u.LastTime,
			&u.Equal, &u.Util, &u.BusyEqual, &u.BusyUtil, &u.Energy); err != nil {
			return nil, fmt.Errorf("store: ledger: %w", err)
		}
		if uid.Valid {
			v := uid.Int64
			u.User.UID = &v
		}
		u.User.Declared = decl != 0
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: ledger: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return userHourLess(&out[i], &out[j]) })
	return out, nil
}

func gpuHourLess(a, b *GPUHour) bool {
	if a.Hour != b.Hour {
		return a.Hour < b.Hour
	}
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	if a.UUID != b.UUID {
		return a.UUID < b.UUID
	}
	return a.Model < b.Model
}

func userHourLess(a, b *UserHour) bool {
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
	if ak, bk := a.User.Key(), b.User.Key(); ak != bk {
		return ak < bk
	}
	if a.Model != b.Model {
		return a.Model < b.Model
	}
	if a.Profile != b.Profile {
		return a.Profile < b.Profile
	}
	if a.Slices != b.Slices {
		return a.Slices < b.Slices
	}
	return a.Total < b.Total
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
				x.FirstTime = x.LastTime
				continue
			}
			ui[k] = len(d.Users)
			u.FirstTime = u.LastTime
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

// TieKey is the key of LedgerTies' answer: a user of a node.
func TieKey(node string, u *UserIdentity) string { return node + "\x1e" + u.Key() }

// LedgerTies returns, for each user of users (by TieKey), what
// TieCandidates returns for it, in one statement per tie rule for them
// all.
func (s *Store) LedgerTies(ctx context.Context, users []UserHour) (map[string][]Tie, error) {
	type tieRow struct {
		key               string
		tie               Tie
		hostname, k8sNode string
	}
	read := func(st *stmt, keys any) ([]tieRow, error) {
		arg, err := json.Marshal(keys)
		if err != nil {
			return nil, fmt.Errorf("store: ledger ties: %w", err)
		}
		rows, err := s.query(ctx, s.r, st, string(arg))
		if err != nil {
			return nil, fmt.Errorf("store: ledger ties: %w", err)
		}
		defer rows.Close()
		var out []tieRow
		for rows.Next() {
			var r tieRow
			if err := rows.Scan(&r.key, &r.tie.Key, &r.tie.TaskID, &r.tie.Project, &r.tie.Owner, &r.tie.StartTime, &r.hostname, &r.k8sNode); err != nil {
				return nil, fmt.Errorf("store: ledger ties: %w", err)
			}
			out = append(out, r)
		}
		return out, rows.Err()
	}
	pick := func(sqlite, postgres *stmt) *stmt {
		if s.dialect == Postgres {
			return postgres
		}
		return sqlite
	}
	// The keys of each rule, as tieCandidates chooses the rule.
	pods, jobs, decls := map[string]bool{}, map[string]bool{}, map[[2]string]bool{}
	for i := range users {
		u := &users[i].User
		switch {
		case u.PodUID != "":
			pods[u.PodUID] = true
		case u.SlurmJob != "":
			jobs[u.SlurmJob] = true
		case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
			decls[[2]string{u.DeclaredTaskID, u.DeclaredProject}] = true
		}
	}
	byPod, byJob, byRun, byDecl := map[string][]tieRow{}, map[string][]tieRow{}, map[string][]tieRow{}, map[[2]string][]tieRow{}
	if len(pods) > 0 {
		rows, err := read(pick(stmtTiesPodSQLite, stmtTiesPodPostgres), sortedKeys(pods))
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			byPod[r.key] = append(byPod[r.key], r)
		}
	}
	if len(jobs) > 0 {
		keys := sortedKeys(jobs)
		rows, err := read(pick(stmtTiesSlurmSQLite, stmtTiesSlurmPostgres), keys)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			byJob[r.key] = append(byJob[r.key], r)
		}
		if rows, err = read(pick(stmtTiesSlurmRunSQLite, stmtTiesSlurmRunPostgres), keys); err != nil {
			return nil, err
		}
		for _, r := range rows {
			byRun[r.key] = append(byRun[r.key], r)
		}
	}
	if len(decls) > 0 {
		keys := make([][2]string, 0, len(decls))
		for k := range decls {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x1f"+keys[i][1] < keys[j][0]+"\x1f"+keys[j][1] })
		rows, err := read(pick(stmtTiesContainerSQLite, stmtTiesContainerPostgres), keys)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			k := [2]string{r.tie.TaskID, r.tie.Project}
			byDecl[k] = append(byDecl[k], r)
		}
	}
	out := map[string][]Tie{}
	for i := range users {
		node, u := users[i].Node, &users[i].User
		key := TieKey(node, u)
		if _, ok := out[key]; ok {
			continue
		}
		var list []Tie
		seen := map[int64]bool{}
		add := func(rows []tieRow, keep func(r *tieRow) bool) {
			for j := range rows {
				if r := &rows[j]; !seen[r.tie.Key] && keep(r) {
					seen[r.tie.Key] = true
					list = append(list, r.tie)
				}
			}
		}
		onNode := func(r *tieRow) bool { return r.hostname == node || r.k8sNode == node }
		switch {
		case u.PodUID != "":
			add(byPod[u.PodUID], func(*tieRow) bool { return true })
		case u.SlurmJob != "":
			add(byJob[u.SlurmJob], onNode)
			add(byRun[u.SlurmJob], onNode)
		case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
			host := u.ContainerID
			if len(host) > 12 {
				host = host[:12]
			}
			add(byDecl[[2]string{u.DeclaredTaskID, u.DeclaredProject}], func(r *tieRow) bool {
				return (u.DeclaredOwner == "" || r.tie.Owner == u.DeclaredOwner) && (r.hostname == host || r.k8sNode == node)
			})
		}
		sort.SliceStable(list, func(i, j int) bool {
			if list[i].StartTime != list[j].StartTime {
				return list[i].StartTime < list[j].StartTime
			}
			return list[i].Key < list[j].Key
		})
		out[key] = list
	}
	return out, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
