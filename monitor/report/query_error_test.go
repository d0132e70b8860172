package report

import (
	"errors"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// TestQueryError: each refused parameter is a *QueryError naming the
// parameter (errors.As), is ErrBadQuery (errors.Is), and its message is
// "bad report query: " and the rule, byte for byte.
func TestQueryError(t *testing.T) {
	now := time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		err        error
		param, msg string
	}{
		{"unknown key", second(facts.ParseKeys("project,team")), "by",
			`bad report query: by: unknown key "team" (allowed: project, owner, priority, env, pipeline, step, task_name, hostname, node, model, label:NAME)`},
		{"metric twice", second(facts.ParseMetrics([]string{"loss", "loss"})), "metric", `bad report query: metric "loss" given twice`},
		{"bad date", second(facts.ParseDate("--from", "yesterday")), "--from",
			`bad report query: --from "yesterday" is neither RFC 3339 (2026-11-01T00:00:00Z), YYYY-MM-DD nor YYYY-MM`},
		{"bad month", second(facts.ParseMonth("month", "11/2026")), "month",
			`bad report query: month: "11/2026" is not YYYY-MM (a month such as 2026-11)`},
		{"from alone", second(facts.WindowParams{From: "2026-11-01", FromName: "from", ToName: "to"}.Select(now)), "to",
			"bad report query: to is required with from (the two go together)"},
		{"empty window", second(facts.WindowParams{From: "2026-11-02", To: "2026-11-01", FromName: "from", ToName: "to"}.Select(now)), "",
			"bad report query: from (2026-11-02T00:00:00Z) must be before to (2026-11-01T00:00:00Z)"},
		{"format", Write(nil, &Report{}, "xml"), "format", `bad report query: format "xml" is not one of table, csv, json`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qe, ok := errors.AsType[*facts.QueryError](c.err)
			if !ok || !errors.Is(c.err, facts.ErrBadQuery) {
				t.Fatalf("%v: want a *QueryError that is ErrBadQuery", c.err)
			}
			if qe.Param != c.param || qe.Error() != c.msg {
				t.Errorf("Param %q, message %q; want %q, %q", qe.Param, qe.Error(), c.param, c.msg)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }
