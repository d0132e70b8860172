// Package csvout is the one CSV writer of the monitor's exports (the
// report, the chargeback statement, the ledger): encoding/csv's quoting,
// plus the formula rule every export owes a spreadsheet.
//
// The formula rule (OWASP, CSV injection): a cell that starts with '=',
// '+', '-', '@', a tab or a carriage return is what a spreadsheet reads as
// a formula, so it is written with a leading '. Text in an export is not
// the monitor's own: a GPU model is free text from NVML, a project or a
// label is what a task declared, so every text cell passes the rule. A
// cell that is a negative decimal number ("-1.5", "-2e-3") is a figure, not a
// formula, and is written as it is, so that figures stay numbers.
package csvout

import (
	"encoding/csv"
	"io"
	"strings"
)

// Writer writes CSV records with every cell under the formula rule.
type Writer struct {
	cw *csv.Writer
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{cw: csv.NewWriter(w)} }

// Write writes one record, each cell passed through Cell. The record
// given is not changed.
func (w *Writer) Write(record []string) error {
	out := make([]string, len(record))
	for i, c := range record {
		out[i] = Cell(c)
	}
	return w.cw.Write(out)
}

// Flush writes any buffered data to the underlying writer; Error reports
// what went wrong in a Write or Flush.
func (w *Writer) Flush() { w.cw.Flush() }

// Error reports any error of a previous Write or Flush.
func (w *Writer) Error() error { return w.cw.Error() }

// Cell applies the formula rule to one cell: s with a leading ' when it
// starts with = + - @ tab or CR and is not a negative decimal number.
func Cell(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) || number(s) {
		return s
	}
	return "'" + s
}

// number reports whether s is a plain decimal number as the exports write
// a figure: an optional '-', digits with an optional fraction, an optional
// exponent. Nothing else a spreadsheet could evaluate fits that shape; a
// leading '+' is not a figure's (strconv never writes one) and is escaped.
func number(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
