package store

import "fmt"

// TooManyOpenError is a write refused by the bound on open tasks: the
// sender has Count open tasks and pending completions, the bound is
// Bound. It is ErrTooManyOpen for errors.Is.
type TooManyOpenError struct{ Count, Bound int }

func (e *TooManyOpenError) Error() string {
	return fmt.Sprintf("%v (%s)", ErrTooManyOpen, e.Detail())
}

// Detail says the counts: "3 open tasks and pending completions, the
// bound is 3".
func (e *TooManyOpenError) Detail() string {
	return fmt.Sprintf("%d open tasks and pending completions, the bound is %d", e.Count, e.Bound)
}

// Unwrap makes every TooManyOpenError ErrTooManyOpen for errors.Is.
func (e *TooManyOpenError) Unwrap() error { return ErrTooManyOpen }
