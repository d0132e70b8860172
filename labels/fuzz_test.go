package labels

import (
	"strings"
	"testing"
)

// FuzzParseFormat asserts the injection-proof property of the labels file:
// whatever the task's environment holds, the file is one key=value line per
// key, every key is one of ours or a well-formed extra key, no key repeats,
// and no value breaks the name rule. The seed corpus is in
// testdata/fuzz/FuzzParseFormat.
func FuzzParseFormat(f *testing.F) {
	f.Add("resnet", "search_ranking", "alice@example.com", "high", "cost_center", "cc-1024", "2h")
	f.Add("x\nproject=admin", "a\r\nowner=root", "bob\x00", "HIGH\n", "team\nx", "v\"}", "1\n")
	f.Fuzz(func(t *testing.T, name, project, owner, priority, extraKey, extraValue, duration string) {
		env := []string{
			"PADDLE_TASK_NAME=" + name,
			"PADDLE_PROJECT=" + project,
			"PADDLE_OWNER=" + owner,
			"PADDLE_PRIORITY=" + priority,
			"PADDLE_DURATION_EST=" + duration,
			"PADDLE_TASK_ID=" + name,
			ExtraPrefix + extraKey + "=" + extraValue,
		}
		s, problems := Parse(env, Options{Hostname: "h", Now: now})
		data := s.Format()
		assertOneLinePerKey(t, data)
		lines := strings.Count(string(data), "\n")
		if lines < 6 || lines > 13+1+1 {
			t.Fatalf("%d lines:\n%s", lines, data)
		}
		for _, p := range problems {
			if strings.ContainsAny(p.Var, "\n") && !strings.Contains(p.Error(), p.Var) {
				t.Fatalf("problem does not name its variable: %q", p.Error())
			}
		}
	})
}
