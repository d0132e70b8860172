// Package settings is the one way the programs read their settings
// (paddle-entrypoint, paddle-monitor, and any program after them): a table
// of entries, each a flag, an environment variable, a type, a default and a
// description, which gives the flags, the environment lookup and the
// --help lines alike.
//
// The rules, the same for every program (docs/contract.md, docs/monitor.md):
//
//   - Every setting has a flag and an environment variable; the flag wins.
//     An empty variable counts as unset.
//   - A malformed value given as a flag is a usage error (ErrUsage: exit 2).
//   - A malformed value from the environment follows the table's Policy,
//     the one thing a program chooses: Fallback (the entrypoint, whose
//     environment is the task's and which never stops training) logs a
//     warning and uses the default; Refuse (the monitor, the node agent,
//     whose settings are the deployment's) stops with an error naming the
//     variable.
//   - Booleans have one parser (Bool): on, off, 1, 0, true, false, yes, no,
//     in any case.
//   - A Secret setting may come from a file: when VAR is unset, VAR_FILE
//     names a file holding the value (surrounding white space trimmed); a
//     file that cannot be read, or is empty, is an error naming VAR_FILE
//     under either policy (a secret is never replaced by a default).
package settings

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// ErrUsage marks a malformed flag: the caller's mistake, exit status 2.
var ErrUsage = errors.New("usage error")

// FlagError is a malformed flag; errors.Is(err, ErrUsage) holds.
type FlagError struct {
	Flag string // without dashes
	Err  error  // the rule broken
}

func (e *FlagError) Error() string        { return fmt.Sprintf("%v: --%s: %v", ErrUsage, e.Flag, e.Err) }
func (e *FlagError) Unwrap() error        { return e.Err }
func (e *FlagError) Is(target error) bool { return target == ErrUsage }

// EnvError is a malformed environment value under Refuse. It names the
// variable and the value, unless the setting is a secret.
type EnvError struct {
	Var, Value string
	Secret     bool
	Err        error // the rule broken
}

func (e *EnvError) Error() string {
	if e.Secret {
		return e.Var + ": malformed (the value is a secret, not shown)"
	}
	return fmt.Sprintf("%s=%q: %v", e.Var, e.Value, e.Err)
}

func (e *EnvError) Unwrap() error { return e.Err }

// Policy is what a malformed environment value does.
type Policy int

const (
	// Fallback reports the value as a warning and uses the default.
	Fallback Policy = iota
	// Refuse makes the value an error naming the variable.
	Refuse
)

// Entry is one setting, stored into a T (the program's settings struct)
// by Parse.
type Entry[T any] struct {
	Flag string // the long flag, without dashes
	Var  string // the environment variable
	// Type is the kind of value --help shows beside the flag: string,
	// duration, int, number, on|off, bool (shown as nothing, as pflag
	// shows its own booleans).
	Type    string
	Default string // parsed like any value; --help shows it
	Doc     string
	Parse   func(dst *T, s string) error
	// Secret: VAR_FILE may name a file holding the value.
	Secret bool
	// Alone is the value of the flag given without one (--signal-group);
	// "": the flag needs a value.
	Alone string
}

// Table is a program's settings.
type Table[T any] struct {
	Entries []Entry[T]
	Policy  Policy
}

// Define adds a flag for every entry to fs. Its help line is the entry's
// Doc, the variable (and VAR_FILE for a secret), the type and the default.
func (t Table[T]) Define(fs *pflag.FlagSet) {
	for _, e := range t.Entries {
		doc := e.Doc
		if e.Secret {
			doc += " (or a file named by " + e.Var + "_FILE)"
		}
		v := &text{s: e.Default, kind: e.Type}
		fs.Var(v, e.Flag, fmt.Sprintf("%s (env %s)", doc, e.Var))
		v.s = "" // only a flag given on the command line is read
		if e.Alone != "" {
			fs.Lookup(e.Flag).NoOptDefVal = e.Alone
		}
	}
}

// Resolve stores every setting into dst: its default, then its variable,
// then its flag when fs (nil: none) had it on the command line. lookup
// reads the environment (Environ, or os.LookupEnv). It returns the
// warnings of malformed variables the policy let fall back, and the first
// error: a malformed flag (ErrUsage), a secret's unreadable file, or under
// Refuse a malformed variable.
func (t Table[T]) Resolve(dst *T, fs *pflag.FlagSet, lookup func(string) (string, bool)) (warnings []string, err error) {
	return t.ResolveLocked(dst, fs, lookup, Locks{})
}

// Locks are what an administrator fixes above the environment and the
// flags (the entrypoint's policy file): Values replace entries' defaults,
// by variable; an entry whose variable is Locked takes its Values value,
// or its default, whatever its variable and its flag say. Source names
// where the locks come from, in the warnings.
type Locks struct {
	Values map[string]string
	Locked map[string]bool
	Source string
}

// ResolveLocked is Resolve under locks. A locked entry never reads its
// variable or flag: one that is set is a warning naming it and locks'
// Source (once each), never an error, whatever its value. A Values value
// its entry refuses is a warning too, and the entry's default applies.
func (t Table[T]) ResolveLocked(dst *T, fs *pflag.FlagSet, lookup func(string) (string, bool), locks Locks) (warnings []string, err error) {
	for _, e := range t.Entries {
		if err := e.Parse(dst, e.Default); err != nil {
			panic("settings: bad default for --" + e.Flag + ": " + err.Error())
		}
		def := e.Default
		if v, ok := locks.Values[e.Var]; ok && v != e.Default {
			if err := e.Parse(dst, v); err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: the value %q of %s: %v; using the default %q", e.Var, v, locks.Source, err, e.Default))
				e.Parse(dst, e.Default)
			} else {
				def = v
			}
		}
		if locks.Locked[e.Var] {
			if v, from, _ := e.env(lookup); v != "" {
				warnings = append(warnings, fmt.Sprintf("%s: locked by the policy file %s; the task's value is ignored and %q applies", from, locks.Source, def))
			}
			if fs != nil && fs.Changed(e.Flag) {
				warnings = append(warnings, fmt.Sprintf("--%s: locked by the policy file %s; the task's value is ignored and %q applies", e.Flag, locks.Source, def))
			}
			continue
		}
		v, from, err := e.env(lookup)
		if err != nil {
			return warnings, err
		}
		if v != "" {
			if err := e.Parse(dst, v); err != nil {
				if t.Policy == Refuse {
					return warnings, &EnvError{Var: from, Value: v, Secret: e.Secret, Err: err}
				}
				warnings = append(warnings, fmt.Sprintf("%s: %v; using the default %q", from, err, def))
				e.Parse(dst, def)
			}
		}
		if fs != nil && fs.Changed(e.Flag) {
			if err := e.Parse(dst, fs.Lookup(e.Flag).Value.String()); err != nil {
				return warnings, &FlagError{Flag: e.Flag, Err: err}
			}
		}
	}
	return warnings, nil
}

// Entry returns the entry of variable, if the table has one.
func (t Table[T]) Entry(variable string) (Entry[T], bool) {
	for _, e := range t.Entries {
		if e.Var == variable {
			return e, true
		}
	}
	return Entry[T]{}, false
}

// env returns the entry's environment value ("" when unset) and where it
// came from (VAR, or VAR_FILE for a secret read from a file).
func (e Entry[T]) env(lookup func(string) (string, bool)) (value, from string, err error) {
	if v, ok := lookup(e.Var); ok && v != "" {
		return v, e.Var, nil
	}
	if !e.Secret {
		return "", e.Var, nil
	}
	path, ok := lookup(e.Var + "_FILE")
	if !ok || path == "" {
		return "", e.Var, nil
	}
	from = e.Var + "_FILE"
	b, err := os.ReadFile(path)
	if err != nil {
		return "", from, fmt.Errorf("%s: %w", from, err)
	}
	if value = strings.TrimSpace(string(b)); value == "" {
		return "", from, fmt.Errorf("%s: %s is empty", from, path)
	}
	return value, from, nil
}

// Vars lists the environment variables of the table's entries.
func (t Table[T]) Vars() []string {
	names := make([]string, len(t.Entries))
	for i, e := range t.Entries {
		names[i] = e.Var
	}
	return names
}

// Environ is the lookup of an environment given as KEY=VALUE strings; of
// a variable given twice, the first wins (as getenv(3) finds it).
func Environ(environ []string) func(string) (string, bool) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[k]; !dup {
				env[k] = v
			}
		}
	}
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// text is a setting's flag: it keeps the value as given, for Resolve to
// parse after the environment (so that the flag wins), and names its type
// for --help.
type text struct{ s, kind string }

func (v *text) String() string { return v.s }

// Set keeps the flag's value; a "list" flag given again adds to it
// (comma-separated, as its variable is written).
func (v *text) Set(s string) error {
	if v.kind == "list" && v.s != "" {
		v.s += "," + s
	} else {
		v.s = s
	}
	return nil
}
func (v *text) Type() string { return v.kind }

// IsBoolFlag makes --help show a "bool" setting as pflag shows its own
// (--name[=true|false]).
func (v *text) IsBoolFlag() bool { return v.kind == "bool" }

// Bool reads a switch: on, 1, true, yes or off, 0, false, no, in any case.
func Bool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "on", "true", "yes":
		return true, nil
	case "0", "off", "false", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not one of on, off, 1, 0", s)
}

// Duration reads a non-negative Go duration (5s, 168h).
func Duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a non-negative duration such as 5s", s)
	}
	return d, nil
}

// PositiveDuration reads a Go duration greater than zero.
func PositiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 168h", s)
	}
	return d, nil
}

// Positive reads a whole number of at least 1.
func Positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a positive integer", s)
	}
	return n, nil
}

// OneOf reads one of allowed, in any case, and returns it as allowed has it.
func OneOf(s string, allowed ...string) (string, error) {
	low := strings.ToLower(s)
	for _, a := range allowed {
		if low == a {
			return a, nil
		}
	}
	return "", fmt.Errorf("%q is not one of %s", s, strings.Join(allowed, ", "))
}
