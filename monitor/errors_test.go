package monitor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// The answers built from typed errors: the counts of a 429 from the
// store's *TooManyOpenError (wrapped as the store wraps it), the rule of a
// refused report parameter from the *QueryError, byte for byte.
func TestAnswersFromTypedErrors(t *testing.T) {
	tooMany := fmt.Errorf("store: register t1: %w", &store.TooManyOpenError{Count: 3, Bound: 3})
	for _, c := range []struct {
		name, got, want string
	}{
		{"429 of a token", tooManyOpen(store.Sender{Token: "search"}, tooMany),
			"token search has reached its bound of open tasks (--max-open-per-token; 3 open tasks and pending completions, the bound is 3): complete some, or wait until those not seen for --open-ttl no longer count"},
		{"429 without tokens", tooManyOpen(store.Sender{}, tooMany),
			"the monitor (no tokens file: one bound for all) has reached its bound of open tasks (--max-open-per-token; 3 open tasks and pending completions, the bound is 3): complete some, or wait until those not seen for --open-ttl no longer count"},
		{"bad parameter", badParameter(second(facts.ParseMonth("month", "11/2026"))),
			`parameter month: "11/2026" is not YYYY-MM (a month such as 2026-11)`},
		{"not a query error", badParameter(errors.New("something else")), "parameter something else"},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, c.got, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
