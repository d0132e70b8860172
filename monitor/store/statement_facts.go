package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// The task facts a statement freezes (migration 0019, MONITOR.md 20.10):
// the report's sums of the month task by task, and the node reports'
// observations of it, as the close read them. A closed month's report by
// any grouping is these summed again (books), so it is what the live
// report gave at the close whatever is stored since.

// Frozen are a month's facts as a close froze them: Sums are the report's
// sums grouped by every key, the task's store key (KeyTask), its task_id
// and its labels ("label:NAME"), so that each group is one task (Base
// without model, Tasks and GPUs by model); Obs the window's observations
// (nil when no node report covered the month).
type Frozen struct {
	Sums facts.Sums
	Obs  *facts.Observations
}

// KeyTask is the key of a frozen group that holds the task's store key
// (tasks.id), so that a task's rows are told apart from another's with the
// same keys.
const KeyTask = "id"

// labelsCol is the span's column of a task's labels object (spanOf), read
// whole for the frozen facts and turned into one "label:NAME" key each.
const labelsCol = "labels"

// frozenCols are the groups of TaskFacts without model: one per task.
var frozenCols = append(append([]string{KeyTask, "task_id"}, slices.DeleteFunc(slices.Clone(facts.Keys),
	func(k string) bool { return k == "model" })...), labelsCol)

// TaskFacts are the report's sums of w task by task (Frozen.Sums), read
// as ReportSums by model reads them, with the same statements: what the
// report of any grouping of w adds up at this instant.
func (s *Store) TaskFacts(ctx context.Context, w facts.Window) (facts.Sums, error) {
	var sums facts.Sums
	var err error
	if sums.Base, sums.Tasks, err = s.baseSums(ctx, w, frozenCols); err != nil {
		return sums, err
	}
	tasks, gpus, err := s.modelSums(ctx, w, append(slices.Clone(frozenCols), "model"))
	if err != nil {
		return sums, err
	}
	sums.Tasks = append(sums.Tasks, tasks...)
	sums.GPUs = gpus
	for _, list := range [][]facts.TaskSums{sums.Base, sums.Tasks} {
		for i := range list {
			if list[i].Key, err = labelKeys(list[i].Key); err != nil {
				return sums, err
			}
		}
	}
	for i := range sums.GPUs {
		if sums.GPUs[i].Key, err = labelKeys(sums.GPUs[i].Key); err != nil {
			return sums, err
		}
	}
	return sums, nil
}

// labelKeys replaces key's labels object by one "label:NAME" key per
// label (the value the report by label:NAME groups the task under).
func labelKeys(key map[string]string) (map[string]string, error) {
	raw, ok := key[labelsCol]
	if !ok {
		return key, nil
	}
	delete(key, labelsCol)
	if raw == "" {
		return key, nil
	}
	var labels map[string]any
	if err := json.Unmarshal([]byte(raw), &labels); err != nil {
		return nil, fmt.Errorf("store: task %s's labels: %w", key[KeyTask], err)
	}
	for k, v := range labels {
		switch x := v.(type) {
		case string:
			key["label:"+k] = x
		case nil:
		default:
			b, _ := json.Marshal(x)
			key["label:"+k] = string(b)
		}
	}
	return key, nil
}

// factColumns are statement_task_facts' columns after month, version and
// line, in the order factRow writes and scanFact reads them.
const factColumns = `kind, task_key, day, model, mig, profile, basis, task_id, project, owner, priority, env, pipeline, step,
	task_name, hostname, node, labels, namespace, use_node, slices, total_slices, failed, counted_s, covered_s, covered_unlisted_s,
	tasks, completed, failed_tasks, gate_failed, open_tasks, est_s, actual_s, queue_wait_s, queue_wait_tasks, queue_wait_max,
	unlisted_gpu_s, failed_unlisted_gpu_s, instance_s, gpu_s, failed_gpu_s, idle_gpu_s, idle_ok_gpu_s, util_weighted, util_s,
	busy_s, energy_j, energy_gpus`

// factBatch is how many rows one INSERT of the frozen facts writes: 51
// arguments a row, 20,400 bound, under both engines' limits (SQLite's
// 32,766, PostgreSQL's 65,535). A month of 100,000 tasks is some 300,000
// rows, 750 statements, not 300,000 round trips inside the close's
// transaction.
const factBatch = 400

// insertFactsSQL is the INSERT of n rows of statement_task_facts.
func insertFactsSQL(n int) string {
	return frozenInsertSQL("statement_task_facts", factNames, n)
}

// frozenInsertSQL is the INSERT of n rows of table, a statement's frozen
// rows: month, version and line, then the columns named.
func frozenInsertSQL(table string, names []string, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(names)+3), ", ") + ")"
	return `INSERT INTO ` + table + ` (month, version, line, ` + strings.Join(names, ", ") + `)
		VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// frozenRead reads one statement version's rows of table in their order,
// by its primary key (month, version, line).
func frozenRead(table, columns string) *stmt {
	return &stmt{sql: `SELECT ` + columns + ` FROM ` + table + ` WHERE month = ? AND version = ? ORDER BY line`,
		sqliteIndex: "sqlite_autoindex_" + table + "_1", postgresIndex: table + "_pkey",
		example: []any{"2026-11", int64(1)}}
}

var (
	stmtInsertTaskFacts = &stmt{build: func(Dialect) string { return insertFactsSQL(2) },
		example: append(exampleFact(), exampleFact()...)}
	stmtTaskFacts = frozenRead("statement_task_facts", factColumns)
)

func exampleFact() []any {
	args := []any{"2026-11", int64(1), int64(0)}
	return append(args, factRow{kind: "task"}.values()...)
}

// factRow is one row of statement_task_facts.
type factRow struct {
	kind                        string
	taskKey, day                int64
	key                         map[string]string
	labels                      map[string]string
	basis, namespace, useNode   string
	failed                      bool
	counted, covered, coveredUL float64
	t                           facts.TaskSums
	g                           facts.GPUSums
	use                         facts.InstanceUse
}

var rowKeys = []string{"task_id", "project", "owner", "priority", "env", "pipeline", "step", "task_name", "hostname", "node"}

func (r factRow) values() []any {
	labels := "{}"
	if len(r.labels) > 0 {
		b, _ := json.Marshal(r.labels)
		labels = string(b)
	}
	mig, model, profile := r.g.MIG, r.key["model"], r.g.Profile
	nSlices, total, busy := int64(0), int64(0), 0.0
	gpuSec, energy := r.g.GPUSeconds, r.g.EnergyJoules
	if r.kind == "ouse" || r.kind == "ounat" || r.kind == "undecl" {
		mig, model, profile = r.use.MIG, r.use.Model, r.use.Profile
		nSlices, total, busy, gpuSec, energy = r.use.Slices, r.use.TotalSlices, r.use.BusySeconds, r.use.Seconds, r.use.EnergyJoules
	}
	out := []any{r.kind, r.taskKey, r.day, model, b2i(mig), profile, r.basis}
	for _, k := range rowKeys {
		out = append(out, r.key[k])
	}
	return append(out, labels, r.namespace, r.useNode, nSlices, total, b2i(r.failed), r.counted, r.covered, r.coveredUL,
		r.t.Tasks, r.t.Completed, r.t.Failed, r.t.GateFailed, r.t.Open, r.t.EstSeconds, r.t.ActualSeconds,
		r.t.QueueWaitSeconds, r.t.QueueWaitTasks, r.t.QueueWaitMax, r.t.UnlistedGPUSeconds, r.t.FailedUnlistedGPUSeconds,
		r.g.InstanceSeconds, gpuSec, r.g.FailedGPUSeconds, r.g.IdleGPUSeconds, r.g.IdleOKGPUSeconds, r.g.UtilWeighted,
		r.g.UtilSeconds, busy, energy, r.g.EnergyGPUs)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// frozenRows are f as statement_task_facts' rows, in order.
func frozenRows(f *Frozen, day int64) []factRow {
	// The first row says the statement froze its facts, so a month
	// without a task still has them (and none is read from the tasks).
	out := []factRow{{kind: "month", day: day}}
	declared := func(kind string, key map[string]string) factRow {
		r := factRow{kind: kind, day: day, basis: facts.BasisDeclared, key: key, labels: map[string]string{}}
		r.taskKey, _ = strconv.ParseInt(key[KeyTask], 10, 64)
		for k, v := range key {
			if name, ok := facts.LabelName(k); ok {
				r.labels[name] = v
			}
		}
		return r
	}
	for _, t := range f.Sums.Base {
		r := declared("task", t.Key)
		r.t = t
		out = append(out, r)
	}
	for _, t := range f.Sums.Tasks {
		r := declared("model", t.Key)
		r.t = t
		out = append(out, r)
	}
	for _, g := range f.Sums.GPUs {
		r := declared("gpu", g.Key)
		r.g = g
		out = append(out, r)
	}
	if f.Obs == nil || !f.Obs.Covered {
		return out
	}
	obs := func(kind string, key map[string]string) factRow {
		return factRow{kind: kind, day: day, basis: facts.BasisObserved, key: key}
	}
	out = append(out, obs("obs", nil))
	for _, t := range f.Obs.Tasks {
		r := obs("otask", t.Key)
		r.taskKey, r.failed, r.counted, r.covered, r.coveredUL = t.ID, t.Failed, t.CountedSeconds, t.CoveredSeconds, t.CoveredUnlistedSeconds
		out = append(out, r)
		for _, g := range t.CoveredDeclared {
			c := obs("ocov", g.Key)
			c.taskKey, c.g = t.ID, g
			out = append(out, c)
		}
		for _, u := range t.Observed {
			c := obs("ouse", nil)
			c.taskKey, c.use, c.useNode = t.ID, u, u.Node
			out = append(out, c)
		}
		for _, u := range t.Unattributed {
			c := obs("ounat", nil)
			c.taskKey, c.use, c.useNode, c.namespace = t.ID, u.Use, u.Use.Node, u.Namespace
			out = append(out, c)
		}
	}
	for _, u := range f.Obs.Undeclared {
		c := obs("undecl", nil)
		c.use, c.useNode, c.namespace = u.Use, u.Use.Node, u.Namespace
		out = append(out, c)
	}
	return out
}

// writeFrozen stores f as version's rows of month, in tx.
// The rows go factBatch at a time.
func (s *Store) writeFrozen(ctx context.Context, tx *sql.Tx, month string, version int, f *Frozen, day int64) error {
	rows := frozenRows(f, day)
	err := s.writeBatches(ctx, tx, stmtInsertTaskFacts, insertFactsSQL, len(rows), factBatch, func(i int) []any {
		return append([]any{month, version, int64(i)}, rows[i].values()...)
	})
	if err != nil {
		return fmt.Errorf("store: close %s: task facts: %w", month, err)
	}
	return nil
}

// writeBatches runs the INSERT of n rows, batch rows at a time: sql(k)
// is the template st's instance of k rows, args(i) row i's arguments.
func (s *Store) writeBatches(ctx context.Context, tx *sql.Tx, st *stmt, sql func(k int) string, n, batch int, args func(i int) []any) error {
	for start := 0; start < n; start += batch {
		end := min(n, start+batch)
		var all []any
		for i := start; i < end; i++ {
			all = append(all, args(i)...)
		}
		if _, err := s.execBuilt(ctx, tx, st, sql(end-start), all...); err != nil {
			return err
		}
	}
	return nil
}

// StatementFacts are the facts version of month's statement froze, as
// they were read at its close; nil when it froze none (a statement of a
// store before migration 0019).
func (s *Store) StatementFacts(ctx context.Context, month string, version int) (*Frozen, error) {
	rows, err := stmtRows(ctx, s, s.r, "statement facts", stmtTaskFacts, scanFact, month, version)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	f := &Frozen{}
	var task *facts.ObservedTask
	for _, r := range rows {
		switch r.kind {
		case "month":
		case "task":
			f.Sums.Base = append(f.Sums.Base, withKey(r.t, r.declaredKey(false)))
		case "model":
			f.Sums.Tasks = append(f.Sums.Tasks, withKey(r.t, r.declaredKey(true)))
		case "gpu":
			g := r.g
			g.Key = r.declaredKey(true)
			f.Sums.GPUs = append(f.Sums.GPUs, g)
		case "obs":
			f.Obs = &facts.Observations{Covered: true}
		case "otask":
			f.Obs.Tasks = append(f.Obs.Tasks, facts.ObservedTask{ID: r.taskKey, Key: r.key, Failed: r.failed,
				CountedSeconds: r.counted, CoveredSeconds: r.covered, CoveredUnlistedSeconds: r.coveredUL})
			task = &f.Obs.Tasks[len(f.Obs.Tasks)-1]
		case "ocov":
			g := r.g
			g.Key = r.key
			task.CoveredDeclared = append(task.CoveredDeclared, g)
		case "ouse":
			task.Observed = append(task.Observed, r.use)
		case "ounat":
			task.Unattributed = append(task.Unattributed, facts.UndeclaredUse{Namespace: r.namespace, Use: r.use})
		case "undecl":
			f.Obs.Undeclared = append(f.Obs.Undeclared, facts.UndeclaredUse{Namespace: r.namespace, Use: r.use})
		default:
			return nil, fmt.Errorf("store: statement %s version %d: a task fact of kind %q", month, version, r.kind)
		}
	}
	return f, nil
}

func withKey(t facts.TaskSums, key map[string]string) facts.TaskSums {
	t.Key = key
	return t
}

// declaredKey is a declared row's key as TaskFacts gave it: the task's
// keys, its store key, its labels, and its model where model is set.
func (r factRow) declaredKey(model bool) map[string]string {
	k := maps.Clone(r.key)
	k[KeyTask] = strconv.FormatInt(r.taskKey, 10)
	if !model {
		delete(k, "model")
	}
	for name, v := range r.labels {
		k["label:"+name] = v
	}
	return k
}

// scanFact reads one row of stmtTaskFacts. Where a row's kind keeps its
// figures in the instance use (ouse, ounat, undecl), the model, MIG and
// seconds columns are the use's.
func scanFact(rows *sql.Rows, r *factRow) error {
	var mig, failed int64
	var model, labels string
	keys := make([]string, len(rowKeys))
	dest := []any{&r.kind, &r.taskKey, &r.day, &model, &mig, &r.g.Profile, &r.basis}
	for i := range keys {
		dest = append(dest, &keys[i])
	}
	var nSlices, total int64
	var busy, gpuSec, energy float64
	dest = append(dest, &labels, &r.namespace, &r.useNode, &nSlices, &total, &failed, &r.counted, &r.covered, &r.coveredUL,
		&r.t.Tasks, &r.t.Completed, &r.t.Failed, &r.t.GateFailed, &r.t.Open, &r.t.EstSeconds, &r.t.ActualSeconds,
		&r.t.QueueWaitSeconds, &r.t.QueueWaitTasks, &r.t.QueueWaitMax, &r.t.UnlistedGPUSeconds, &r.t.FailedUnlistedGPUSeconds,
		&r.g.InstanceSeconds, &gpuSec, &r.g.FailedGPUSeconds, &r.g.IdleGPUSeconds, &r.g.IdleOKGPUSeconds, &r.g.UtilWeighted,
		&r.g.UtilSeconds, &busy, &energy, &r.g.EnergyGPUs)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	r.failed = failed == 1
	r.key = map[string]string{}
	for i, k := range rowKeys {
		r.key[k] = keys[i]
	}
	switch r.kind {
	case "ouse", "ounat", "undecl":
		r.use = facts.InstanceUse{Node: r.useNode, Model: model, Profile: r.g.Profile, MIG: mig == 1, Slices: nSlices,
			TotalSlices: total, Seconds: gpuSec, BusySeconds: busy, EnergyJoules: energy}
		r.key, r.g = nil, facts.GPUSums{}
		return nil
	case "obs", "month":
		r.key = nil
	case "otask":
		// An attributed task's keys are every report key but model.
	default:
		r.key["model"] = model
		r.g.MIG, r.g.GPUSeconds, r.g.EnergyJoules = mig == 1, gpuSec, energy
	}
	if r.kind == "task" || r.kind == "model" || r.kind == "gpu" {
		if err := json.Unmarshal([]byte(labels), &r.labels); err != nil {
			return fmt.Errorf("labels: %w", err)
		}
	}
	return nil
}

// factNames are factColumns' names, in order.
var factNames = columnNames(factColumns)

// columnNames are the names of a list of columns, in order.
func columnNames(cols string) []string {
	var out []string
	for _, c := range strings.Split(cols, ",") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}

// JSONLines is f's canonical serialisation as version's rows of a month
// starting at day (Unix seconds): one JSON object a row, in the order they
// are stored, its members line then statement_task_facts' columns in
// order (numbers as encoding/json writes them: the shortest form that
// reads back the same). A statement's task_facts_sha256 is over these
// bytes, so the rows read back (StatementFacts) hash the same.
func (f *Frozen) JSONLines(day int64) ([]byte, error) {
	rows := frozenRows(f, day)
	return jsonLines(len(rows), factNames, func(i int) []any { return rows[i].values() })
}

// jsonLines are n rows as canonical JSON Lines: one object a row, its
// members line (the row's index) then names with values(i), in order.
func jsonLines(n int, names []string, values func(i int) []any) ([]byte, error) {
	var b bytes.Buffer
	for i := range n {
		b.WriteString(`{"line":`)
		b.WriteString(strconv.Itoa(i))
		for j, v := range values(i) {
			name, _ := json.Marshal(names[j])
			val, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("store: statement facts: %w", err)
			}
			b.WriteByte(',')
			b.Write(name)
			b.WriteByte(':')
			b.Write(val)
		}
		b.WriteString("}\n")
	}
	return b.Bytes(), nil
}
