package facts

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseKeys(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    string
		wantErr string
	}{
		{"", "project", ""},
		{"project", "project", ""},
		{" owner , model ", "owner,model", ""},
		{"project,owner,priority,env,pipeline,step,task_name,hostname,model", "project,owner,priority,env,pipeline,step,task_name,hostname,model", ""},
		{"cost_center", "", `unknown key "cost_center"`},
		{"project,,owner", "", "an empty key"},
		{"project,project", "", `key "project" given twice`},
		{"Project", "", `unknown key "Project"`},
		{"label:Cost_Center,project", "label:cost_center,project", ""},
		{"label:team.a-b", "label:team.a-b", ""},
		{"label:cost_center,label:COST_CENTER", "", `key "label:cost_center" given twice`},
		{"label:", "", `label key "label:": NAME must be`},
		{"label:cost center", "", `label key "label:cost center": NAME must be`},
		{"label:'x", "", `NAME must be`},
		{"label:-x", "", `NAME must be`},
	} {
		got, err := ParseKeys(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrBadQuery) {
				t.Errorf("ParseKeys(%q) = %v, %v; want an ErrBadQuery saying %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != c.want {
			t.Errorf("ParseKeys(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestParseDate(t *testing.T) {
	for _, c := range []struct {
		in, want, wantErr string
	}{
		{"2026-11-01", "2026-11-01T00:00:00Z", ""},
		{"2026-11-01T08:00:00+08:00", "2026-11-01T00:00:00Z", ""},
		{"2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", ""},
		{"2026-11", "2026-11-01T00:00:00Z", ""},
		{"", "", "from is required"},
		{"2026-13", "", `from "2026-13" is neither`},
		{"2026-13-01", "", `from "2026-13-01" is neither`},
		{"01/11/2026", "", "neither RFC 3339"},
		{"2026-11-01 00:00:00", "", "neither RFC 3339"},
	} {
		got, err := ParseDate("from", c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrBadQuery) {
				t.Errorf("ParseDate(%q) = %v, %v; want an error saying %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.Format(time.RFC3339) != c.want || got.Location() != time.UTC {
			t.Errorf("ParseDate(%q) = %v, %v; want %s UTC", c.in, got, err, c.want)
		}
	}
	w := Window{From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "from (2026-12-01T00:00:00Z) must be before to") {
		t.Errorf("an inverted window: %v", err)
	}
	if m := Month(time.Date(2026, 12, 31, 23, 59, 0, 0, time.FixedZone("x", -3600))); m.From.Format(time.DateOnly) != "2027-01-01" || m.To.Format(time.DateOnly) != "2027-02-01" {
		t.Errorf("Month: %v", m)
	}
}

func TestWindowParamsSelect(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		p             WindowParams
		from, to, err string
	}{
		{WindowParams{}, "2026-12-01", "2027-01-01", ""},
		{WindowParams{Month: "2025-02"}, "2025-02-01", "2025-03-01", ""},
		{WindowParams{Month: "2025-02", From: "2025-01-15", To: "2025-01-16"}, "2025-01-15", "2025-01-16", ""},
		{WindowParams{From: "2025-01", To: "2025-03"}, "2025-01-01", "2025-03-01", ""},
		{WindowParams{From: "2025-01-15"}, "", "", "to is required with from"},
		{WindowParams{To: "2025-01-15", Month: "2025-01"}, "", "", "from is required with to"},
		{WindowParams{Month: "2025-1"}, "", "", `month: "2025-1" is not YYYY-MM`},
		{WindowParams{From: "2025-02", To: "2025-01"}, "", "", "must be before to"},
	} {
		c.p.FromName, c.p.ToName, c.p.MonthName = "from", "to", "month"
		w, err := c.p.Select(now)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadQuery) {
				t.Errorf("%+v: %v, %v; want an error saying %q", c.p, w, err, c.err)
			}
			continue
		}
		if err != nil || w.From.Format(time.DateOnly) != c.from || w.To.Format(time.DateOnly) != c.to {
			t.Errorf("%+v: %v, %v; want [%s, %s)", c.p, w, err, c.from, c.to)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	long := strings.Repeat("m", 63)
	for _, ok := range [][]string{nil, {"accuracy"}, {"eval.accuracy", "loss", "f1-score", "top_5", "0.5-iou", long}} {
		if got, err := ParseMetrics(ok); err != nil || strings.Join(got, ",") != strings.Join(ok, ",") {
			t.Errorf("ParseMetrics(%q) = %q, %v", ok, got, err)
		}
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	for _, c := range []struct {
		in      []string
		wantErr string
	}{
		{[]string{""}, `metric "": a metric name is 1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit`},
		{[]string{long + "m"}, `metric "` + long + `m": a metric name is 1 to 63`},
		{[]string{"eval accuracy"}, `metric "eval accuracy": a metric name`},
		{[]string{"acc'); DROP TABLE tasks; --"}, `metric "acc'); DROP TABLE tasks; --": a metric name`},
		{[]string{`a"b`}, `metric "a\"b": a metric name`},
		{[]string{"$.x"}, `metric "$.x": a metric name`},
		{[]string{".accuracy"}, `metric ".accuracy": a metric name`},
		{[]string{"accuracy", "loss", "accuracy"}, `metric "accuracy" given twice`},
		{many, "65 metrics asked for, at most 64"},
	} {
		if _, err := ParseMetrics(c.in); err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrBadQuery) {
			t.Errorf("ParseMetrics(%q) = %v; want an ErrBadQuery saying %q", c.in, err, c.wantErr)
		}
	}
}
