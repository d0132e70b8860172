package sensitive_test

// The end-to-end property of the package, checked through its consumer:
// whatever a task puts in a label variable, a value the detectors flag
// reaches neither the labels file, nor the registration body, nor the text
// of a warning.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
)

// leakVars are the variables a fuzzed value is put in: every built-in label
// and an extra one. A slot past the list puts the value in an extra label's
// name instead.
var leakVars = []string{
	"PADDLE_TASK_NAME", "PADDLE_PROJECT", "PADDLE_OWNER", "PADDLE_PRIORITY",
	"PADDLE_ENV", "PADDLE_DURATION_EST", "PADDLE_TASK_ID", "PADDLE_TRAINER_ID",
	"PADDLE_TRAINERS_NUM", "PADDLE_LABEL_NOTE", "PADDLE_LABEL_COST_CENTER",
}

var longDigits = regexp.MustCompile(`[0-9]{13,}`)

func FuzzSensitiveNoLeak(f *testing.F) {
	for _, s := range []string{
		"110101199003074514", "run-110101199003074514-x", "11010519491231002X",
		"110105491231002", "4111111111111111", "pay-4111-1111-1111-1111",
		"password=hunter2", "token:abc", "-----BEGIN RSA PRIVATE KEY-----",
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "AKIAIOSFODNN7EXAMPLE",
		"https://u:p@h/", "１１０１０１１９９００３０７４５１４",
		"run-1732950000007", "search_ranking", "admin", "",
	} {
		for i := range len(leakVars) + 1 {
			f.Add(s, uint8(i), false)
		}
	}
	dir := f.TempDir()
	polFile := filepath.Join(dir, "policy.json")
	err := os.WriteFile(polFile, []byte(`{
		"labels": {"project": {"allow": ["search_*", "ocr-*"], "deny": ["admin"]},
		           "note": {"deny": ["x*"]}}
	}`), 0o644)
	if err != nil {
		f.Fatal(err)
	}
	pol, err := policy.Load(polFile)
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, value string, slot uint8, withPolicy bool) {
		env := []string{
			"PADDLE_TASK_NAME=train-bert", "PADDLE_PROJECT=search_ranking",
			"PADDLE_OWNER=alice@example.com", "PADDLE_LABEL_TEAM=nlp",
		}
		var v string
		if i := int(slot) % (len(leakVars) + 1); i < len(leakVars) {
			v = leakVars[i]
			env = append([]string{v + "=" + value}, env...) // first wins, as with getenv
		} else {
			// The value as an extra label's name: PADDLE_LABEL_<value>=1.
			if strings.Contains(value, "=") {
				return // not a variable name
			}
			env = append(env, labels.ExtraPrefix+value+"=1")
			v = labels.ExtraPrefix + "..."
		}
		opt := labels.Options{
			Hostname: "node-1",
			Now:      time.Unix(1732950000, 0),
			NewID:    func() string { return "fixed-task-id" },
		}
		if withPolicy {
			opt.Policy = pol
		}
		set, problems := labels.Parse(env, opt)

		// Whatever the value: nothing a detector flags is in the Set.
		for _, p := range set.Pairs() {
			if k, ok := sensitive.Scan(p.Value); ok {
				t.Fatalf("%s=%q: label %s=%q holds a %s", v, value, p.Key, p.Value, k)
			}
		}

		kind, found := sensitive.Scan(value)
		if !found {
			return
		}
		out := map[string]string{
			"labels file":       string(set.Format()),
			"registration body": string(register.Body(set, gpu.Inventory{})),
		}
		var flagged bool
		for i, p := range problems {
			out[fmt.Sprintf("warning %d (%s)", i, p.Var)] = p.Error()
			if p.Var == v && p.Sensitive == kind {
				flagged = true
			}
		}
		if !flagged {
			t.Errorf("%s=%q is a %s, but no problem names %s with that kind: %v", v, value, kind, v, problems)
		}
		secrets := []string{value}
		secrets = append(secrets, longDigits.FindAllString(value, -1)...)
		for where, text := range out {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("%s=%q is a %s, and %q appears in the %s:\n%s", v, value, kind, s, where, text)
				}
			}
		}
	})
}
