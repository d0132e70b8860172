package store

import (
	"context"
	"sort"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// ShareOverlap is one instant at which the tasks claiming one GPU instance
// declared shares that add up to more than 1 (docs/monitor.md, GPU shares
// and MIG): a discrepancy, since no instance holds more than itself.
type ShareOverlap struct {
	UUID string `json:"uuid"`
	// GPUInstanceID is the MIG GPU instance; nil for a whole GPU.
	GPUInstanceID *int64 `json:"gpu_instance_id"`
	// At is the instant (Unix seconds): the start of a claim, or the
	// window's start.
	At int64 `json:"at"`
	// Total is the sum of the shares claimed at At.
	Total float64            `json:"total_share"`
	Tasks []ShareOverlapTask `json:"tasks"`
}

// ShareOverlapTask is one claim counted in an overlap.
type ShareOverlapTask struct {
	TaskID  string  `json:"task_id"`
	Project string  `json:"project"`
	Owner   string  `json:"owner"`
	Share   float64 `json:"share"`
}

// overlapSlack keeps sums that are 1 but for floating-point rounding (three
// tasks at 1/3) from being listed.
const overlapSlack = 1e-9

// shareOverlapsSQL finds, for every claim in the window, the claims of the
// same GPU instance active at its start (or at the window's start, for a
// claim that began before): a claim is active from its task's start to the
// earlier of its claim's end and its task's counted end (span's ce). The
// sum of claims on an instance only grows at a claim's start, so these
// instants hold every maximum. Span's indexes select the tasks; their GPUs
// by task_gpus' primary key; the claims of the same instance by
// task_gpus_uuid_start (uuid, task_start).
var shareOverlapsSQL = `WITH ` + spanSQL + `,
c AS (
  SELECT sp.id, sp.task_id, sp.project, sp.owner, g.uuid, COALESCE(g.gpu_instance_id, -1) AS gi, g.share,
    sp.start_time AS s,
    CASE WHEN g.claim_ended IS NOT NULL AND g.claim_ended < sp.ce THEN g.claim_ended ELSE sp.ce END AS e
  FROM span sp JOIN task_gpus g ON g.task_key = sp.id
  WHERE g.uuid <> ''
)
SELECT a.uuid, a.gi, CASE WHEN a.s < :f THEN :f ELSE a.s END AS at, b.id, b.task_id, b.project, b.owner, b.share
FROM c a JOIN c b ON b.uuid = a.uuid AND b.gi = a.gi
  AND b.s <= CASE WHEN a.s < :f THEN :f ELSE a.s END AND b.e > CASE WHEN a.s < :f THEN :f ELSE a.s END
WHERE a.e > a.s AND a.e > :f
ORDER BY a.uuid, a.gi, at, b.id`

// ShareOverlaps lists the instants in the window at which the claims of a
// GPU instance (a whole GPU, or a MIG GPU instance) declared shares adding
// up to more than 1, each with the tasks and their shares, by UUID, GPU
// instance and time. A run of such instants lists each claim's start in
// it once.
func (s *Store) ShareOverlaps(ctx context.Context, w facts.Window) ([]ShareOverlap, error) {
	rows, err := s.reportQuery(ctx, shareOverlapsSQL, w, "")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type key struct {
		uuid string
		gi   int64
		at   int64
	}
	var order []key
	found := map[key]*ShareOverlap{}
	seen := map[key]map[int64]bool{}
	if err := eachRow(rows.Rows, "share overlaps", func() error {
		var k key
		var id int64
		var t ShareOverlapTask
		if err := rows.Scan(&k.uuid, &k.gi, &k.at, &id, &t.TaskID, &t.Project, &t.Owner, &t.Share); err != nil {
			return err
		}
		o := found[k]
		if o == nil {
			o = &ShareOverlap{UUID: k.uuid, At: k.at}
			if k.gi >= 0 {
				gi := k.gi
				o.GPUInstanceID = &gi
			}
			found[k], seen[k] = o, map[int64]bool{}
			order = append(order, k)
		}
		if seen[k][id] { // several claims that began before the window share its start
			return nil
		}
		seen[k][id] = true
		o.Total += t.Share
		o.Tasks = append(o.Tasks, t)
		return nil
	}); err != nil {
		return nil, err
	}
	var out []ShareOverlap
	for _, k := range order {
		if o := found[k]; o.Total > 1+overlapSlack {
			out = append(out, *o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.UUID != b.UUID {
			return a.UUID < b.UUID
		}
		ag, bg := int64(-1), int64(-1)
		if a.GPUInstanceID != nil {
			ag = *a.GPUInstanceID
		}
		if b.GPUInstanceID != nil {
			bg = *b.GPUInstanceID
		}
		if ag != bg {
			return ag < bg
		}
		return a.At < b.At
	})
	return out, nil
}
