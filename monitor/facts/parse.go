package facts

import (
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// Check says whether the window is usable: both ends set, From before To.
func (w Window) Check() error {
	if w.From.IsZero() || w.To.IsZero() {
		return badQuery("", "the window needs both from and to")
	}
	if !w.From.Before(w.To) {
		return badQuery("", "from (%s) must be before to (%s)",
			w.From.UTC().Format(time.RFC3339), w.To.UTC().Format(time.RFC3339))
	}
	return nil
}

// ParseKeys reads a comma-separated list of grouping keys ("project,owner",
// "label:cost_center"; a label key's NAME lower-cased). Empty means project. A key that is unknown or repeated is an error naming
// it and the keys allowed.
func ParseKeys(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{"project"}, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		lk, isLabel, err := labelKey(k)
		if err != nil {
			return nil, err
		}
		if isLabel {
			k = lk
		}
		switch {
		case k == "":
			return nil, badQuery("by", "by %q: an empty key (keys are comma-separated: %s)", s, strings.Join(Keys, ", "))
		case !isLabel && !slices.Contains(Keys, k):
			return nil, badQuery("by", "by: unknown key %q (allowed: %s, label:NAME)", k, strings.Join(Keys, ", "))
		case slices.Contains(out, k):
			return nil, badQuery("by", "by: key %q given twice", k)
		}
		out = append(out, k)
	}
	return out, nil
}

// maxMetrics bounds the metrics of one report: the monitor stores at
// most 64 per completion.
const maxMetrics = 64

// ParseMetrics checks the completion metrics a report should show: each
// follows the name rule the monitor applies to a completion's metrics keys
// (wire.ValidName: 1 to 63 letters, digits, '.', '_' or '-', beginning
// with a letter or digit), none twice, at most 64. The error names the
// metric and the rule.
func ParseMetrics(names []string) ([]string, error) {
	if len(names) > maxMetrics {
		return nil, badQuery("metric", "metric: %d metrics asked for, at most %d", len(names), maxMetrics)
	}
	for i, n := range names {
		if !wire.ValidName(n, "") {
			return nil, badQuery("metric", "metric %q: a metric name is 1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit", n)
		}
		if slices.Contains(names[:i], n) {
			return nil, badQuery("metric", "metric %q given twice", n)
		}
	}
	return names, nil
}

// ParseDate reads a window end: RFC 3339 ("2026-11-01T08:00:00+08:00"), a
// date ("2026-11-01", UTC midnight) or a month ("2026-11", the first of it
// at UTC midnight, as the page's month= reads). name is the parameter's
// name, for the error.
func ParseDate(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badQuery(name, "%s is required (RFC 3339, YYYY-MM-DD or YYYY-MM)", name)
	}
	for _, layout := range []string{time.DateOnly, monthLayout} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, badQuery(name, "%s %q is neither RFC 3339 (2026-11-01T00:00:00Z), YYYY-MM-DD nor YYYY-MM", name, s)
	}
	return t.UTC(), nil
}

const monthLayout = "2006-01"

// ParseMonth reads a calendar month, YYYY-MM (UTC), as a window. name is
// the parameter's name, for the error.
func ParseMonth(name, s string) (Window, error) {
	t, err := time.Parse(monthLayout, s)
	if err != nil {
		return Window{}, badQuery(name, "%s: %q is not YYYY-MM (a month such as 2026-11)", name, s)
	}
	return Month(t), nil
}

// WindowParams are a report's window as the caller gave it: from and to
// (together), or a month, or nothing (the month that holds now). The names
// are the parameters' as the caller spells them ("--from" on the command
// line, "from" on HTTP), for the errors.
type WindowParams struct {
	From, To, Month             string
	FromName, ToName, MonthName string
}

// Select returns the window the parameters ask for. from and to go
// together and win over month; neither of them nor month means the
// calendar month (UTC) that holds now. One of from and to alone is an
// error naming the other.
func (p WindowParams) Select(now time.Time) (Window, error) {
	switch {
	case p.From != "" && p.To == "":
		return Window{}, badQuery(p.ToName, "%s is required with %s (the two go together)", p.ToName, p.FromName)
	case p.To != "" && p.From == "":
		return Window{}, badQuery(p.FromName, "%s is required with %s (the two go together)", p.FromName, p.ToName)
	case p.From != "":
		var w Window
		var err error
		if w.From, err = ParseDate(p.FromName, p.From); err != nil {
			return w, err
		}
		if w.To, err = ParseDate(p.ToName, p.To); err != nil {
			return w, err
		}
		return w, w.Check()
	case p.Month != "":
		return ParseMonth(p.MonthName, p.Month)
	}
	return Month(now), nil
}

// Month returns the calendar month (UTC) that holds t, as a window.
func Month(t time.Time) Window {
	t = t.UTC()
	from := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Window{From: from, To: from.AddDate(0, 1, 0)}
}
