package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestTooManyOpenError: a registration past the sender's bound is a
// *TooManyOpenError carrying the count and the bound (errors.As), is
// ErrTooManyOpen (errors.Is), and says both in its message.
func TestTooManyOpenError(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.OpenWith(t, dsn, store.Options{Now: fixedNow, MaxOpenPerToken: 2})
		from := store.Sender{Token: "search"}
		start := fixedNow().Unix() - 60
		for i := range 2 {
			r := reg(fmt.Sprintf("o-%d", i), "search", "ann", start)
			r.From = from
			mustRegister(t, s, r)
		}
		r := reg("o-2", "search", "ann", start)
		r.From = from
		_, err := register(s, r)
		tm, ok := errors.AsType[*store.TooManyOpenError](err)
		if !ok || !errors.Is(err, store.ErrTooManyOpen) {
			t.Fatalf("third registration: %v, want a *TooManyOpenError that is ErrTooManyOpen", err)
		}
		if *tm != (store.TooManyOpenError{Count: 2, Bound: 2}) {
			t.Errorf("error carries %+v, want Count 2, Bound 2", *tm)
		}
		const want = "store: the token has too many open tasks (2 open tasks and pending completions, the bound is 2)"
		if tm.Error() != want {
			t.Errorf("message %q, want %q", tm.Error(), want)
		}
	})
}
