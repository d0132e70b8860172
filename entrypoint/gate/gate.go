// Package gate is the quality gate of a pipeline step: comparisons such as
// "accuracy>=0.95,loss<0.3" checked against a JSON file of the step's
// metrics after the command exits 0, so that a DAG engine stops the steps
// downstream of a model that is not good enough.
//
// Guarantees: Parse accepts exactly `key OP number` comparisons joined by
// ',' (a key is ASCII letters, digits, '_', '-' and '.'; OP one of >=, >,
// <=, <, ==; the number a finite decimal or exponent float) and names what
// is wrong otherwise, so a typo is caught before hours of training.
// Evaluate never blocks on the file (non-blocking open, regular files
// only, size capped), never panics on hostile JSON, and fails closed: a
// missing, unreadable or malformed file, or a missing key, fails the gate.
package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// MaxFileSize bounds the metrics file read.
const MaxFileSize = 1 << 20

// MaxMetrics is how many numeric metrics a completion carries.
const MaxMetrics = 32

// MaxText bounds the expression and the reason, in bytes, as the monitor
// does.
const MaxText = 1024

// maxDepth bounds the nesting of the metrics file.
const maxDepth = 32

// Op is a comparison operator.
type Op string

// Operators.
const (
	GE Op = ">="
	GT Op = ">"
	LE Op = "<="
	LT Op = "<"
	EQ Op = "=="
)

// Comparison is one `key OP number`.
type Comparison struct {
	Key   string
	Op    Op
	Value float64
}

// Gate is a parsed expression: every comparison must hold.
type Gate struct {
	Expr        string
	Comparisons []Comparison
}

// ErrSyntax marks a malformed expression.
var ErrSyntax = errors.New("malformed gate")

// Parse reads an expression such as "accuracy>=0.95,eval.loss<3e-1".
// Spaces around keys, operators and numbers are allowed.
func Parse(expr string) (*Gate, error) {
	g := &Gate{Expr: expr}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("%w: empty expression", ErrSyntax)
	}
	if len(expr) > MaxText {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrSyntax, MaxText)
	}
	for i, part := range strings.Split(expr, ",") {
		c, err := parseComparison(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%w: comparison %d %q: %v", ErrSyntax, i+1, part, err)
		}
		g.Comparisons = append(g.Comparisons, c)
	}
	return g, nil
}

func parseComparison(s string) (Comparison, error) {
	if s == "" {
		return Comparison{}, errors.New("empty (a stray ',')")
	}
	n := 0
	for n < len(s) && isKeyByte(s[n]) {
		n++
	}
	key := s[:n]
	if key == "" {
		return Comparison{}, errors.New("no key (letters, digits, '_', '-', '.') before the operator")
	}
	rest := strings.TrimLeft(s[n:], " ")
	var op Op
	for _, o := range []Op{GE, LE, EQ, GT, LT} {
		if strings.HasPrefix(rest, string(o)) {
			op = o
			break
		}
	}
	if op == "" {
		return Comparison{}, fmt.Errorf("after key %q: want one of >=, >, <=, <, ==", key)
	}
	num := strings.TrimSpace(rest[len(op):])
	v, err := parseNumber(num)
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{Key: key, Op: op, Value: v}, nil
}

func isKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

// parseNumber accepts [+-] digits [. digits] [e [+-] digits] (or .digits),
// finite: no hex, no underscores, no Inf or NaN.
func parseNumber(s string) (float64, error) {
	bad := fmt.Errorf("%q is not a decimal or exponent number such as 0.95 or 1e-3", s)
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, bad
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return 0, bad
		}
	}
	if i != len(s) {
		return 0, bad
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return v, nil
}

// Result is the gate's verdict, as the completion carries it.
type Result struct {
	Expr   string `json:"expr"`
	Passed bool   `json:"passed"`
	Reason string `json:"reason"`
}

// Evaluate reads the metrics file at path and checks every comparison. It
// returns the verdict and up to MaxMetrics numeric metrics of the file
// (the first dotted keys in byte order; nil when the file is unusable).
func (g *Gate) Evaluate(path string) (Result, map[string]float64) {
	r, m := g.evaluate(path)
	r.Reason = clean(r.Reason)
	return r, m
}

// clean makes a reason safe to log and to send: no control characters (a
// file name may hold any), valid UTF-8, at most MaxText bytes.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	for len(s) > MaxText {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

func (g *Gate) evaluate(path string) (Result, map[string]float64) {
	r := Result{Expr: g.Expr}
	all, err := ReadMetrics(path)
	if err != nil {
		r.Reason = err.Error()
		return r, nil
	}
	for _, c := range g.Comparisons {
		v, ok := all[c.Key]
		if !ok {
			r.Reason = fmt.Sprintf("%s: no number under this key in %s", c.Key, path)
			return r, first(all)
		}
		if !c.holds(v) {
			r.Reason = fmt.Sprintf("%s=%s is not %s %s", c.Key, format(v), c.Op, format(c.Value))
			return r, first(all)
		}
	}
	var held []string
	for _, c := range g.Comparisons {
		held = append(held, fmt.Sprintf("%s=%s %s %s", c.Key, format(all[c.Key]), c.Op, format(c.Value)))
	}
	r.Passed, r.Reason = true, strings.Join(held, ", ")
	return r, first(all)
}

func (c Comparison) holds(v float64) bool {
	switch c.Op {
	case GE:
		return v >= c.Value
	case GT:
		return v > c.Value
	case LE:
		return v <= c.Value
	case LT:
		return v < c.Value
	default:
		return v == c.Value
	}
}

func format(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// first returns the first MaxMetrics entries of all by key in byte order,
// among the keys that follow the labels' name rule (the monitor refuses a
// completion with any other, and a refused completion is lost to the
// dead letters).
func first(all map[string]float64) map[string]float64 {
	keys := make([]string, 0, len(all))
	for k := range all {
		if wire.ValidName(k, "") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > MaxMetrics {
		keys = keys[:MaxMetrics]
	}
	out := make(map[string]float64, len(keys))
	for _, k := range keys {
		out[k] = all[k]
	}
	return out
}

// ReadMetrics reads the numeric leaves of the JSON object at path, nested
// keys joined with '.'. Strings, booleans, nulls and arrays are skipped. A
// key that appears twice (literally, or once nested and once dotted) makes
// the file ambiguous: an error.
func ReadMetrics(path string) (map[string]float64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("gate file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gate file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("gate file %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("gate file: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("gate file %s: larger than %d bytes", path, MaxFileSize)
	}
	out := map[string]float64{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("gate file %s: not a JSON object", path)
	}
	if err := walk(dec, "", out, 1); err != nil {
		return nil, fmt.Errorf("gate file %s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("gate file %s: data after the JSON object", path)
	}
	return out, nil
}

// walk reads the members of an object whose '{' was read.
func walk(dec *json.Decoder, prefix string, out map[string]float64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string)
		if seen[name] {
			return fmt.Errorf("key %q appears twice", prefix+name)
		}
		seen[name] = true
		key := prefix + name
		tok, err = dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' {
				if err := walk(dec, key+".", out, depth+1); err != nil {
					return err
				}
			} else if err := skip(dec, depth+1); err != nil {
				return err
			}
		case json.Number:
			f, err := v.Float64()
			if err != nil {
				return fmt.Errorf("%s: %v is out of range", key, v)
			}
			if _, dup := out[key]; dup {
				return fmt.Errorf("key %q appears twice", key)
			}
			out[key] = f
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// skip reads the rest of an array whose '[' was read.
func skip(dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' {
				// Objects inside arrays have no dotted name: skipped.
				if err := walk(dec, "\x00", map[string]float64{}, depth+1); err != nil {
					return err
				}
			} else if err := skip(dec, depth+1); err != nil {
				return err
			}
		}
	}
	_, err := dec.Token() // ']'
	return err
}
