package nodeagent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
)

// flaky answers from a list: a Snapshot with that many containers, or
// an error for -1.
type flaky struct {
	answers []int
	n       int
}

func (f *flaky) Name() string { return "test" }

func (f *flaky) Snapshot(context.Context) (Snapshot, error) {
	a := f.answers[f.n]
	f.n++
	if a < 0 {
		return Snapshot{}, errors.New("socket hung")
	}
	return Snapshot{Containers: make([]Container, a)}, nil
}

// TestCachedSourceReuse: a failed call reuses the previous answer for up
// to three samples, each failure counted.
func TestCachedSourceReuse(t *testing.T) {
	a := &agent{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics("n")}
	src := &flaky{answers: []int{2, -1, -1, -1, -1, 5, -1}}
	c := &cachedSource{src: src, agent: a}
	want := []int{2, 2, 2, 2, 0, 5, 5}
	for i, w := range want {
		if got := len(c.snapshot(context.Background()).Containers); got != w {
			t.Errorf("sample %d: %d containers, want %d", i, got, w)
		}
	}
}
