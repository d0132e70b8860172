package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/store/storetest"
)

// fixtureDir holds the report fixture whose every figure is computed by
// hand in its README.
const fixtureDir = "../report/testdata"

type fixtureGPU struct {
	Index     int64    `json:"index"`
	UUID      string   `json:"uuid"`
	Name      string   `json:"name"`
	Samples   int64    `json:"samples"`
	UtilMean  *float64 `json:"util_mean"`
	IdleShare *float64 `json:"idle_share"`
}

type fixtureEvent struct {
	Register *struct {
		TaskID      string       `json:"task_id"`
		TaskName    string       `json:"task_name"`
		Project     string       `json:"project"`
		Owner       string       `json:"owner"`
		Priority    string       `json:"priority"`
		Env         string       `json:"env"`
		Pipeline    string       `json:"pipeline"`
		Step        string       `json:"step"`
		Hostname    string       `json:"hostname"`
		GPUCount    int64        `json:"gpu_count"`
		StartTime   int64        `json:"start_time"`
		DurationEst *int64       `json:"duration_est"`
		GPUs        []fixtureGPU `json:"gpus"`
	} `json:"register"`
	Complete *struct {
		TaskID          string       `json:"task_id"`
		EndTime         int64        `json:"end_time"`
		DurationSeconds float64      `json:"duration_seconds"`
		ExitCode        int64        `json:"exit_code"`
		GPUs            []fixtureGPU `json:"gpus"`
		Gate            *struct {
			Passed bool `json:"passed"`
		} `json:"gate"`
	} `json:"complete"`
	Heartbeat *struct {
		TaskID string `json:"task_id"`
		Time   int64  `json:"time"`
	} `json:"heartbeat"`
}

// loadFixture writes the fixture's registrations, completions and
// heartbeats straight into the tables.
func loadFixture(t testing.TB, s *store.Store) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Events []fixtureEvent }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	db := store.DBForTest(s)
	pg := s.Dialect() == store.Postgres
	exec := func(q string, args ...any) {
		t.Helper()
		if pg {
			for n := 1; strings.Contains(q, "?"); n++ {
				q = strings.Replace(q, "?", fmt.Sprintf("$%d", n), 1)
			}
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, e := range f.Events {
		switch {
		case e.Register != nil:
			r := e.Register
			var est sql.NullInt64
			if r.DurationEst != nil {
				est = sql.NullInt64{Int64: *r.DurationEst, Valid: true}
			}
			exec(`INSERT INTO tasks (task_id, task_name, project, owner, priority, env, pipeline, step, hostname,
				start_time, gpu_count, duration_est, registration, registered_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'{}',?)`,
				r.TaskID, r.TaskName, r.Project, r.Owner, r.Priority, r.Env, r.Pipeline, r.Step, r.Hostname,
				r.StartTime, r.GPUCount, est, r.StartTime)
			for i, g := range r.GPUs {
				exec(`INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model) VALUES (?,?,?,?,?)`,
					r.TaskID, i, g.Index, g.UUID, g.Name)
			}
		case e.Complete != nil:
			c := e.Complete
			var gate sql.NullInt64
			if c.Gate != nil {
				gate = sql.NullInt64{Valid: true}
				if c.Gate.Passed {
					gate.Int64 = 1
				}
			}
			exec(`UPDATE tasks SET end_time = ?, duration_seconds = ?, exit_code = ?, gate_passed = ?, completion = '{}' WHERE task_id = ?`,
				c.EndTime, c.DurationSeconds, c.ExitCode, gate, c.TaskID)
			for _, g := range c.GPUs {
				exec(`UPDATE task_gpus SET samples = ?, util_mean = ?, idle_share = ? WHERE task_id = ? AND uuid = ?`,
					g.Samples, g.UtilMean, g.IdleShare, c.TaskID, g.UUID)
			}
		case e.Heartbeat != nil:
			exec(`UPDATE tasks SET last_seen = ? WHERE task_id = ?`, e.Heartbeat.Time, e.Heartbeat.TaskID)
		}
	}
}

var november = report.Window{
	From: time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC),
	To:   time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC),
}

// The fixture's reports, computed by the SQL of each store, are the ones
// computed by hand (report/testdata/README.md), byte for byte, and so are
// the same on SQLite and PostgreSQL.
func TestReportFixture(t *testing.T) {
	prices, err := report.LoadPrices(filepath.Join(fixtureDir, "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadFixture(t, s)
		for _, c := range []struct {
			by     []string
			golden string
		}{
			{[]string{"project"}, "november-by-project.json"},
			{[]string{"model"}, "november-by-model.json"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := report.Compute(ctx, s, report.Query{Window: november, By: c.by, Prices: prices})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := report.WriteJSON(&got, r); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(fixtureDir, c.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("by %v: the report differs from %s:\n%s", c.by, c.golden, got.String())
			}
		}
	})
}
