package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type conf struct {
	Name string
	On   bool
	Wait time.Duration
	DSN  string
}

func table(p Policy) Table[conf] {
	return Table[conf]{Policy: p, Entries: []Entry[conf]{
		{Flag: "name", Var: "T_NAME", Type: "string", Default: "anon", Doc: "a name",
			Parse: func(c *conf, s string) error { c.Name = s; return nil }},
		{Flag: "on", Var: "T_ON", Type: "on|off", Default: "off", Doc: "a switch", Alone: "on",
			Parse: func(c *conf, s string) (err error) { c.On, err = Bool(s); return err }},
		{Flag: "wait", Var: "T_WAIT", Type: "duration", Default: "5s", Doc: "a wait",
			Parse: func(c *conf, s string) (err error) { c.Wait, err = Duration(s); return err }},
		{Flag: "dsn", Var: "T_DSN", Type: "string", Default: "", Doc: "a secret", Secret: true,
			Parse: func(c *conf, s string) error { c.DSN = s; return nil }},
	}}
}

func resolve(t *testing.T, p Policy, args, environ []string) (conf, []string, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	tb := table(p)
	tb.Define(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var c conf
	w, err := tb.Resolve(&c, fs, Environ(environ))
	return c, w, err
}

// The rules of the package comment, one row each, under both policies.
func TestResolve(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "dsn")
	os.WriteFile(secret, []byte("  postgres://u:p@h/db\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	tests := []struct {
		name     string
		policy   Policy
		args     []string
		env      []string
		want     conf
		warnings []string
		err      string // "" none; else the error's text
		usage    bool
	}{
		{name: "defaults", want: conf{Name: "anon", Wait: 5 * time.Second}},
		{name: "env", env: []string{"T_NAME=x", "T_ON=ON", "T_WAIT=1m"}, want: conf{Name: "x", On: true, Wait: time.Minute}},
		{name: "first of twice", env: []string{"T_NAME=a", "T_NAME=b"}, want: conf{Name: "a", Wait: 5 * time.Second}},
		{name: "empty is unset", env: []string{"T_NAME="}, want: conf{Name: "anon", Wait: 5 * time.Second}},
		{name: "flag wins", args: []string{"--name=f", "--on"}, env: []string{"T_NAME=e", "T_ON=0"}, want: conf{Name: "f", On: true, Wait: 5 * time.Second}},
		{name: "bad env falls back", env: []string{"T_WAIT=soon", "T_ON=maybe"}, want: conf{Name: "anon", Wait: 5 * time.Second},
			warnings: []string{`T_ON: "maybe" is not one of on, off, 1, 0; using the default "off"`, `T_WAIT: "soon" is not a non-negative duration such as 5s; using the default "5s"`}},
		{name: "bad env refused", policy: Refuse, env: []string{"T_WAIT=soon"}, err: `T_WAIT="soon": "soon" is not a non-negative duration such as 5s`},
		{name: "bad flag", args: []string{"--wait=-1s"}, err: `usage error: --wait: "-1s" is not a non-negative duration such as 5s`, usage: true},
		{name: "bad flag refused", policy: Refuse, args: []string{"--on=maybe"}, err: `usage error: --on: "maybe" is not one of on, off, 1, 0`, usage: true},
		{name: "secret file", env: []string{"T_DSN_FILE=" + secret}, want: conf{Name: "anon", Wait: 5 * time.Second, DSN: "postgres://u:p@h/db"}},
		{name: "secret variable wins over its file", env: []string{"T_DSN=v", "T_DSN_FILE=" + secret}, want: conf{Name: "anon", Wait: 5 * time.Second, DSN: "v"}},
		{name: "secret file missing", env: []string{"T_DSN_FILE=/nonexistent/dsn"}, err: "T_DSN_FILE: open /nonexistent/dsn: no such file or directory"},
		{name: "secret file empty", env: []string{"T_DSN_FILE=" + empty}, err: "T_DSN_FILE: " + empty + " is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, w, err := resolve(t, tt.policy, tt.args, tt.env)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				if errors.Is(err, ErrUsage) != tt.usage {
					t.Errorf("errors.Is(err, ErrUsage) = %v, want %v", !tt.usage, tt.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if strings.Join(w, "\n") != strings.Join(tt.warnings, "\n") {
				t.Errorf("warnings %q, want %q", w, tt.warnings)
			}
		})
	}
}

// --help shows each entry's type, variable and default as pflag prints them.
func TestDefineHelp(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	table(Fallback).Define(fs)
	want := `      --dsn string       a secret (or a file named by T_DSN_FILE) (env T_DSN)
      --name string      a name (env T_NAME) (default "anon")
      --on on|off[=on]   a switch (env T_ON) (default off)
      --wait duration    a wait (env T_WAIT) (default 5s)
`
	if got := fs.FlagUsages(); got != want {
		t.Errorf("help:\n%s\nwant:\n%s", got, want)
	}
}

func TestBool(t *testing.T) {
	for _, s := range []string{"1", "on", "ON", "true", "True", "yes"} {
		if v, err := Bool(s); err != nil || !v {
			t.Errorf("Bool(%q) = %v, %v", s, v, err)
		}
	}
	for _, s := range []string{"0", "off", "Off", "false", "FALSE", "no"} {
		if v, err := Bool(s); err != nil || v {
			t.Errorf("Bool(%q) = %v, %v", s, v, err)
		}
	}
	for _, s := range []string{"", "2", "y", "enabled", " on", "on "} {
		if _, err := Bool(s); err == nil {
			t.Errorf("Bool(%q) accepted", s)
		}
	}
}

// FuzzBool: whatever the text, Bool either refuses it or gives the answer
// of its lower-case form, and never accepts anything longer than "false".
func FuzzBool(f *testing.F) {
	for _, s := range []string{"on", "OFF", "1", "0", "true", "no", "", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Bool(s)
		if err != nil {
			return
		}
		if len(s) > 5 {
			t.Fatalf("Bool(%q) accepted", s)
		}
		if v2, err2 := Bool(strings.ToLower(s)); err2 != nil || v2 != v {
			t.Fatalf("Bool(%q) = %v but Bool(lower) = %v, %v", s, v, v2, err2)
		}
	})
}

// Under Refuse, a malformed secret is named but never shown, whether it
// came from the variable or from VAR_FILE.
func TestRefusedSecretNotShown(t *testing.T) {
	file := filepath.Join(t.TempDir(), "port")
	os.WriteFile(file, []byte("hunter2\n"), 0o600)
	tb := Table[conf]{Policy: Refuse, Entries: []Entry[conf]{
		{Flag: "wait", Var: "T_PASS", Type: "duration", Default: "1s", Secret: true,
			Parse: func(c *conf, s string) (err error) { c.Wait, err = Duration(s); return err }},
	}}
	for _, env := range [][]string{{"T_PASS=hunter2"}, {"T_PASS_FILE=" + file}} {
		var c conf
		_, err := tb.Resolve(&c, nil, Environ(env))
		var ee *EnvError
		if !errors.As(err, &ee) || strings.Contains(err.Error(), "hunter2") || !strings.HasPrefix(err.Error(), ee.Var+": ") {
			t.Errorf("%v: error %v; want an EnvError naming the variable without the value", env, err)
		}
	}
}

// ResolveLocked: values replace defaults (the task's variable and flag
// still win), a locked entry takes its value or its default whatever the
// variable and the flag say (a malformed flag included: a warning each,
// never an error), and a value its entry refuses is a warning and the
// default.
func TestResolveLocked(t *testing.T) {
	const src = "/etc/p.json"
	tests := []struct {
		name     string
		locks    Locks
		args     []string
		env      []string
		want     conf
		warnings []string
	}{
		{name: "a value is the default", locks: Locks{Values: map[string]string{"T_NAME": "pol"}, Source: src},
			want: conf{Name: "pol", Wait: 5 * time.Second}},
		{name: "the task's variable wins over an unlocked value", locks: Locks{Values: map[string]string{"T_NAME": "pol"}, Source: src},
			env: []string{"T_NAME=task"}, want: conf{Name: "task", Wait: 5 * time.Second}},
		{name: "a bad variable falls back to the value", locks: Locks{Values: map[string]string{"T_WAIT": "1m"}, Source: src},
			env: []string{"T_WAIT=soon"}, want: conf{Name: "anon", Wait: time.Minute},
			warnings: []string{`T_WAIT: "soon" is not a non-negative duration such as 5s; using the default "1m"`}},
		{name: "locked with a value", locks: Locks{Values: map[string]string{"T_NAME": "pol"}, Locked: map[string]bool{"T_NAME": true}, Source: src},
			args: []string{"--name=flag"}, env: []string{"T_NAME=task"}, want: conf{Name: "pol", Wait: 5 * time.Second},
			warnings: []string{`T_NAME: locked by the policy file /etc/p.json; the task's value is ignored and "pol" applies`,
				`--name: locked by the policy file /etc/p.json; the task's value is ignored and "pol" applies`}},
		{name: "locked without a value: the default", locks: Locks{Locked: map[string]bool{"T_WAIT": true}, Source: src},
			args: []string{"--wait=-1s"}, want: conf{Name: "anon", Wait: 5 * time.Second},
			warnings: []string{`--wait: locked by the policy file /etc/p.json; the task's value is ignored and "5s" applies`}},
		{name: "locked and not tried: no warning", locks: Locks{Values: map[string]string{"T_ON": "on"}, Locked: map[string]bool{"T_ON": true}, Source: src},
			want: conf{Name: "anon", On: true, Wait: 5 * time.Second}},
		{name: "a value its entry refuses", locks: Locks{Values: map[string]string{"T_ON": "maybe"}, Locked: map[string]bool{"T_ON": true}, Source: src},
			want:     conf{Name: "anon", Wait: 5 * time.Second},
			warnings: []string{`T_ON: the value "maybe" of /etc/p.json: "maybe" is not one of on, off, 1, 0; using the default "off"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			tb := table(Fallback)
			tb.Define(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			var got conf
			w, err := tb.ResolveLocked(&got, fs, Environ(tt.env), tt.locks)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if strings.Join(w, "\n") != strings.Join(tt.warnings, "\n") {
				t.Errorf("warnings %q,\nwant %q", w, tt.warnings)
			}
		})
	}
}

// TestListFlagRepeats: a "list" flag given twice is both values,
// comma-separated as its variable is written; another flag keeps the last.
func TestListFlagRepeats(t *testing.T) {
	type conf struct{ list, one string }
	tab := Table[conf]{Entries: []Entry[conf]{
		{Flag: "acct", Var: "T_ACCT", Type: "list", Parse: func(c *conf, s string) error { c.list = s; return nil }},
		{Flag: "one", Var: "T_ONE", Type: "string", Parse: func(c *conf, s string) error { c.one = s; return nil }},
	}}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	tab.Define(fs)
	if err := fs.Parse([]string{"--acct", "a/b", "--acct", "c/d", "--one", "x", "--one", "y"}); err != nil {
		t.Fatal(err)
	}
	var c conf
	if _, err := tab.Resolve(&c, fs, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if c.list != "a/b,c/d" || c.one != "y" {
		t.Errorf("list %q, one %q", c.list, c.one)
	}
}
