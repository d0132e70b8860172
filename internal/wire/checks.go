package wire

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The checks every body's Validate is written with, one family for the
// entrypoint's bodies and the node report alike: each returns nil or a
// *FieldError whose Path is the field as the body spells it and whose Rule
// is the sentence the monitor answers with. A new field's check is one of
// these (or a new one here), never a message written in place. The node
// report's rules quote the value they refused ("got 2") where the
// entrypoint's state the range; both texts are part of the documented
// answers (docs/contract.md, docs/monitor.md) and are kept as they are.

// freeText checks a value that is not a label (a GPU's model name, UUID, a
// gate's reason): valid UTF-8, no control characters, at most max bytes.
func freeText(path, s string, max int) error {
	if !utf8.ValidString(s) || len(s) > max || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return &FieldError{path, fmt.Sprintf("must be text of at most %d bytes without control characters", max)}
	}
	return nil
}

// name checks a label value: required ones may not be empty; an empty
// optional one is absent.
func name(path, s string, required bool, extra string) error {
	switch {
	case s == "":
		return missing(path, required)
	case !ValidName(s, extra):
		return &FieldError{path, NameRule(extra)}
	}
	return nil
}

// integer checks an optional integer within [lo, hi]; required says that
// nil is an error.
func integer(path string, v *int64, required bool, lo, hi int64) error {
	if v == nil {
		return missing(path, required)
	}
	return between(path, *v, lo, hi)
}

// missing is the check of an absent optional value: an error only when it
// is required.
func missing(path string, required bool) error {
	if required {
		return &FieldError{path, ruleRequired}
	}
	return nil
}

func between(path string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return &FieldError{path, fmt.Sprintf("must be between %d and %d", lo, hi)}
	}
	return nil
}

// number checks an optional finite number within [lo, hi].
func number(path string, v *float64, required bool, lo, hi float64) error {
	if v == nil {
		return missing(path, required)
	}
	if !(*v >= lo && *v <= hi) { // NaN too, which a Go caller may set
		return &FieldError{path, fmt.Sprintf("must be between %g and %g", lo, hi)}
	}
	return nil
}

// share checks an optional GPU share: the fraction of the physical GPU, in
// (0, 1].
func share(path string, v *float64) error {
	if err := number(path, v, false, 0, 1); err != nil || v == nil {
		return err
	}
	if *v <= 0 {
		return &FieldError{path, ruleShare}
	}
	return nil
}

func bad(field, format string, args ...any) error {
	return &FieldError{Path: field, Rule: fmt.Sprintf(format, args...)}
}

func fraction(field string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return bad(field, "must be in [0, 1], got %v", v)
	}
	return nil
}

func percent(field string, v *float64) error {
	if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 100) {
		return bad(field, "must be in [0, 100] or null, got %v", *v)
	}
	return nil
}

func nonNegative(field string, v *float64) error {
	if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
		return bad(field, "must be at least 0 or null, got %v", *v)
	}
	return nil
}

func text(field, v string) error {
	if len(v) > MaxNodeStringBytes {
		return bad(field, "at most %d bytes, got %d", MaxNodeStringBytes, len(v))
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return bad(field, "must not hold control characters")
	}
	return nil
}

// first is the first of the checks' results that is an error, in the
// order the fields are checked: a list of checks reads as the field list
// it checks. Every check is pure, so running them all costs nothing but
// time.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
