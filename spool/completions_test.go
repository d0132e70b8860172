package spool

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

func TestCompletionsWaitForTheirRegistration(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Path: filepath.Join(t.TempDir(), "spool.db"), MaxEntries: 3})
	reg, err := s.Registrations().Enqueue(ctx, Entry{TaskID: "a", Payload: []byte(`{"task_id":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Completions().Enqueue(ctx, Entry{TaskID: id, Payload: []byte(`{"task_id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ready := func() []string {
		es, err := s.Completions().Oldest(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.TaskID)
		}
		return ids
	}
	if got := ready(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("ready with a's registration pending: %q, want [b]", got)
	}
	if p, _ := s.RegistrationPending(ctx, "a"); !p {
		t.Error("a's registration not reported pending")
	}
	// Registrations never see completions, nor the reverse.
	if es, _ := s.Registrations().Oldest(ctx, 0); len(es) != 1 || es[0].TaskID != "a" {
		t.Errorf("pending registrations %+v", es)
	}
	if err := s.Registrations().Delete(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if got := ready(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("ready once a is registered: %q, want [a b]", got)
	}
	es, _ := s.Completions().Oldest(ctx, 1)
	if err := s.Completions().Bury(ctx, es[0].ID, "400 Bad Request"); err != nil {
		t.Fatal(err)
	}
	dead, _ := s.Completions().List(ctx, true)
	if len(dead) != 1 || dead[0].TaskID != "a" || dead[0].Answer != "400 Bad Request" {
		t.Errorf("dead completions %+v", dead)
	}
	// Bounded: the oldest are dropped past MaxEntries, and counted.
	for _, id := range []string{"c", "d", "e"} {
		s.Completions().Enqueue(ctx, Entry{TaskID: id, Payload: []byte(`{}`)})
	}
	st, err := s.Completions().Stats(ctx)
	if err != nil || st.Pending != 3 || st.Dead != 1 || st.Dropped != 1 {
		t.Errorf("stats %+v, %v", st, err)
	}
	if got := ready(); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Errorf("after the bound: %q", got)
	}
	if reg, _ := s.Registrations().Stats(ctx); reg.Pending != 0 {
		t.Errorf("registrations %+v: completions counted as registrations", reg)
	}
}
