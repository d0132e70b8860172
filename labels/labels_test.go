package labels

import (
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

var now = time.Unix(1732950000, 0)

func parse(env ...string) (*Set, []Problem) {
	return Parse(env, Options{Hostname: "node-1", Now: now, NewID: func() string { return "generated-id" }})
}

func TestValidName(t *testing.T) {
	tests := []struct {
		in    string
		extra string
		want  bool
	}{
		{"search_ranking", "", true},
		{"ocr-v2.1", "", true},
		{"9lives", "", true},
		{"文档智能", "", true},
		{"café", "", true},
		{"cafe\u0301", "", true}, // combining acute accent
		{"Ωmega", "", true},
		{"٣٤", "", true}, // Arabic-Indic digits
		{strings.Repeat("a", 63), "", true},
		{strings.Repeat("é", 63), "", true}, // counted in characters, not bytes
		{"alice@example.com", "@+", true},
		{"alice+ml@example.com", "@+", true},

		{"", "", false},
		{strings.Repeat("a", 64), "", false},
		{"_hidden", "", false},
		{"-x", "", false},
		{".x", "", false},
		{"\u0301x", "", false}, // may not begin with a mark
		{"@alice", "@+", false},
		{"alice@example.com", "", false},
		{"a b", "", false},
		{"a\tb", "", false},
		{"a\nproject=admin", "", false},
		{"a\rb", "", false},
		{`a"b`, "", false},
		{"a'b", "", false},
		{"a=b", "", false},
		{`a\b`, "", false},
		{"a,b", "", false},
		{"a}b", "", false},
		{"a\x00b", "", false},
		{"a\u2028b", "", false}, // line separator
		{"a\u00a0b", "", false}, // no-break space
		{"a\u200bb", "", false}, // zero-width space (format character)
		{"\xff\xfe", "", false},
	}
	for _, tt := range tests {
		if got := wire.ValidName(tt.in, tt.extra); got != tt.want {
			t.Errorf("wire.ValidName(%q, %q) = %v, want %v", tt.in, tt.extra, got, tt.want)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	s, problems := parse()
	if len(problems) != 0 {
		t.Fatalf("problems with an empty environment: %v", problems)
	}
	want := "task_name=unknown_task\nproject=default\nowner=anonymous\ngpu_count=0\nstart_time=1732950000\n" +
		"task_id=generated-id\nhostname=node-1\n"
	if got := string(s.Format()); got != want {
		t.Errorf("Format() =\n%s\nwant\n%s", got, want)
	}
}

func TestParseFullOrder(t *testing.T) {
	s, problems := parse(
		"PADDLE_TASK_NAME=resnet50",
		"PADDLE_PROJECT=search_ranking",
		"PADDLE_OWNER=alice@example.com",
		"PADDLE_PRIORITY=High",
		"PADDLE_ENV=prod",
		"PADDLE_DURATION_EST=2h",
		"PADDLE_TASK_ID=job-42",
		"PADDLE_TRAINER_ID=3",
		"PADDLE_TRAINERS_NUM=8",
		"PADDLE_LABEL_TEAM=vision",
		"PADDLE_LABEL_COST_CENTER=cc-1024",
	)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	s.SetGPUs(2, []string{"GPU-a", "GPU-b"})
	want := strings.Join([]string{
		"task_name=resnet50", "project=search_ranking", "owner=alice@example.com",
		"gpu_count=2", "start_time=1732950000", "task_id=job-42", "priority=high",
		"env=prod", "duration_est=7200", "gpu_uuids=GPU-a,GPU-b", "hostname=node-1",
		"trainer_id=3", "trainers_num=8", "cost_center=cc-1024", "team=vision",
	}, "\n") + "\n"
	if got := string(s.Format()); got != want {
		t.Errorf("Format() =\n%s\nwant\n%s", got, want)
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		wantVar string
		key     string // the key recorded in invalid_labels, "" for none
		check   func(*Set) bool
	}{
		{"bad task name", []string{"PADDLE_TASK_NAME=a b"}, "PADDLE_TASK_NAME", "task_name",
			func(s *Set) bool { return s.TaskName == DefaultTaskName }},
		{"newline forging a line", []string{"PADDLE_PROJECT=x\nproject=admin"}, "PADDLE_PROJECT", "project",
			func(s *Set) bool { return s.Project == DefaultProject }},
		{"owner without e-mail characters rule", []string{"PADDLE_OWNER=bob smith"}, "PADDLE_OWNER", "owner",
			func(s *Set) bool { return s.Owner == DefaultOwner }},
		{"priority", []string{"PADDLE_PRIORITY=urgent"}, "PADDLE_PRIORITY", "priority",
			func(s *Set) bool { return s.Priority == "" }},
		{"env", []string{"PADDLE_ENV=qa"}, "PADDLE_ENV", "env",
			func(s *Set) bool { return s.Env == "" }},
		{"duration zero", []string{"PADDLE_DURATION_EST=0"}, "PADDLE_DURATION_EST", "duration_est",
			func(s *Set) bool { return s.DurationEst == 0 }},
		{"duration over a year", []string{"PADDLE_DURATION_EST=31536001"}, "PADDLE_DURATION_EST", "duration_est", nil},
		{"duration fraction", []string{"PADDLE_DURATION_EST=1.5s"}, "PADDLE_DURATION_EST", "duration_est", nil},
		{"duration negative", []string{"PADDLE_DURATION_EST=-5"}, "PADDLE_DURATION_EST", "duration_est", nil},
		{"duration sign", []string{"PADDLE_DURATION_EST=+5"}, "PADDLE_DURATION_EST", "duration_est", nil},
		{"submit time not a time", []string{"PADDLE_SUBMIT_TIME=yesterday"}, "PADDLE_SUBMIT_TIME", "submit_time",
			func(s *Set) bool { return s.SubmitTime == 0 }},
		{"submit time in milliseconds", []string{"PADDLE_SUBMIT_TIME=1732950000000000"}, "PADDLE_SUBMIT_TIME", "submit_time", nil},
		{"submit time zero", []string{"PADDLE_SUBMIT_TIME=0"}, "PADDLE_SUBMIT_TIME", "submit_time", nil},
		{"submit time negative", []string{"PADDLE_SUBMIT_TIME=-1"}, "PADDLE_SUBMIT_TIME", "submit_time", nil},
		{"submit time without a zone", []string{"PADDLE_SUBMIT_TIME=2024-11-30T06:00:00"}, "PADDLE_SUBMIT_TIME", "submit_time", nil},
		{"submit time after the start", []string{"PADDLE_SUBMIT_TIME=1732950001"}, "PADDLE_SUBMIT_TIME", "submit_time",
			func(s *Set) bool { return s.SubmitTime == 0 }},
		{"submit time (RFC 3339) after the start", []string{"PADDLE_SUBMIT_TIME=2024-11-30T08:00:01+01:00"}, "PADDLE_SUBMIT_TIME", "submit_time", nil},
		{"extra shadows submit_time", []string{"PADDLE_LABEL_SUBMIT_TIME=1"}, "PADDLE_LABEL_SUBMIT_TIME", "submit_time", nil},
		{"task id", []string{"PADDLE_TASK_ID=a/b"}, "PADDLE_TASK_ID", "task_id",
			func(s *Set) bool { return s.TaskID == "generated-id" }},
		{"trainer id", []string{"PADDLE_TRAINER_ID=x"}, "PADDLE_TRAINER_ID", "trainer_id",
			func(s *Set) bool { return s.TrainerID == "" }},
		{"extra shadows built-in", []string{"PADDLE_LABEL_GPU_COUNT=99"}, "PADDLE_LABEL_GPU_COUNT", "gpu_count",
			func(s *Set) bool { return len(s.Extra) == 0 }},
		{"extra shadows invalid_labels", []string{"PADDLE_LABEL_INVALID_LABELS=none"}, "PADDLE_LABEL_INVALID_LABELS", "invalid_labels", nil},
		{"extra shadows task_id", []string{"PADDLE_LABEL_TASK_ID=t"}, "PADDLE_LABEL_TASK_ID", "task_id", nil},
		{"extra bad value", []string{"PADDLE_LABEL_TEAM=a;b"}, "PADDLE_LABEL_TEAM", "team",
			func(s *Set) bool { return len(s.Extra) == 0 }},
		{"extra bad key", []string{"PADDLE_LABEL_A B=x"}, "PADDLE_LABEL_A B", "", nil},
		{"extra empty key", []string{"PADDLE_LABEL_=x"}, "PADDLE_LABEL_", "", nil},
		{"extra twice", []string{"PADDLE_LABEL_TEAM=a", "PADDLE_LABEL_team=b"}, "PADDLE_LABEL_team", "team",
			func(s *Set) bool { return s.Extra["team"] == "a" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, problems := parse(tt.env...)
			if len(problems) != 1 {
				t.Fatalf("problems = %v, want exactly one", problems)
			}
			if problems[0].Var != tt.wantVar {
				t.Errorf("problem names %q, want %q", problems[0].Var, tt.wantVar)
			}
			if !strings.HasPrefix(problems[0].Error(), tt.wantVar+": ") {
				t.Errorf("problem text %q does not start with the variable", problems[0].Error())
			}
			wantInvalid := ""
			if tt.key != "" {
				wantInvalid = tt.key
			}
			if got := strings.Join(s.Invalid, ","); got != wantInvalid {
				t.Errorf("invalid_labels = %q, want %q", got, wantInvalid)
			}
			if tt.check != nil && !tt.check(s) {
				t.Errorf("value not dropped to its default: %+v", s)
			}
			assertOneLinePerKey(t, s.Format())
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		env  string
		want func(*Set) bool
	}{
		{"PADDLE_PRIORITY=LOW", func(s *Set) bool { return s.Priority == "low" }},
		{"PADDLE_PRIORITY=Medium", func(s *Set) bool { return s.Priority == "medium" }},
		{"PADDLE_ENV=Staging", func(s *Set) bool { return s.Env == "staging" }},
		{"PADDLE_DURATION_EST=3600", func(s *Set) bool { return s.DurationEst == 3600 }},
		{"PADDLE_DURATION_EST=90m", func(s *Set) bool { return s.DurationEst == 5400 }},
		{"PADDLE_DURATION_EST=31536000", func(s *Set) bool { return s.DurationEst == MaxDurationEst }},
		{"PADDLE_DURATION_EST=1", func(s *Set) bool { return s.DurationEst == 1 }},
		// now is 1732950000, 2024-11-30T07:00:00Z.
		{"PADDLE_SUBMIT_TIME=1732946400", func(s *Set) bool { return s.SubmitTime == 1732946400 }},
		{"PADDLE_SUBMIT_TIME=1732950000", func(s *Set) bool { return s.SubmitTime == 1732950000 }},
		{"PADDLE_SUBMIT_TIME=2024-11-30T06:00:00Z", func(s *Set) bool { return s.SubmitTime == 1732946400 }},
		{"PADDLE_SUBMIT_TIME=2024-11-30T14:00:00+08:00", func(s *Set) bool { return s.SubmitTime == 1732946400 }},
		{"PADDLE_SUBMIT_TIME=2024-11-30T06:00:00.75Z", func(s *Set) bool { return s.SubmitTime == 1732946400 }},
		{"PADDLE_TASK_NAME=训练-任务.v2", func(s *Set) bool { return s.TaskName == "训练-任务.v2" }},
		{"PADDLE_LABEL_Cost_Center=CC-9", func(s *Set) bool { return s.Extra["cost_center"] == "CC-9" }},
		{"PADDLE_LABEL_TOKENIZER=bpe", func(s *Set) bool { return s.Extra["tokenizer"] == "bpe" }},
		{"PADDLE_TRAINERS_NUM=0", func(s *Set) bool { return s.TrainersNum == "0" }},
	}
	for _, tt := range tests {
		s, problems := parse(tt.env)
		if len(problems) != 0 || !tt.want(s) {
			t.Errorf("%s: problems %v, set %+v", tt.env, problems, s)
		}
	}
}

func TestParseIgnoresOtherVariables(t *testing.T) {
	// Paddle's own launcher variables and our settings are facts or
	// configuration, never labels.
	s, problems := parse("PADDLE_MASTER=10.0.0.1:8090", "PADDLE_LOG_DIR=/log", "PADDLE_LABELS_FILE=/x",
		"PADDLE_LABELS_MODE=enforce", "PADDLE_MONITOR_URL=http://m", "HOME=/root", "PADDLE_ELASTIC_TIMEOUT=60")
	if len(problems) != 0 || len(s.Extra) != 0 {
		t.Fatalf("problems %v, extras %v", problems, s.Extra)
	}
}

func TestParseEmptyIsUnset(t *testing.T) {
	s, problems := parse("PADDLE_PROJECT=", "PADDLE_PRIORITY=", "PADDLE_LABEL_TEAM=", "PADDLE_TASK_ID=")
	if len(problems) != 0 || s.Project != DefaultProject || s.Priority != "" || len(s.Extra) != 0 || s.TaskID != "generated-id" {
		t.Errorf("problems %v, set %+v", problems, s)
	}
}

func TestParseFirstOfRepeatedNameWins(t *testing.T) {
	s, _ := parse("PADDLE_PROJECT=first", "PADDLE_PROJECT=second")
	if s.Project != "first" {
		t.Errorf("project = %q, want the first value as getenv returns it", s.Project)
	}
}

func TestInvalidLabelsListsEachKeyOnce(t *testing.T) {
	s, problems := parse("PADDLE_PROJECT=a b", "PADDLE_OWNER=-x", "PADDLE_LABEL_TEAM=a b")
	if len(problems) != 3 {
		t.Fatalf("problems = %v", problems)
	}
	lines := strings.Split(strings.TrimSpace(string(s.Format())), "\n")
	if last := lines[len(lines)-1]; last != "invalid_labels=project,owner,team" {
		t.Errorf("last line = %q", last)
	}
}

func TestSetGPUsDropsMalformedUUIDs(t *testing.T) {
	s, _ := parse()
	s.SetGPUs(2, []string{"GPU-1", "bad uuid\nx=y"})
	if s.GPUCount != 2 || strings.Join(s.GPUUUIDs, ",") != "GPU-1" {
		t.Errorf("count %d uuids %v", s.GPUCount, s.GPUUUIDs)
	}
}

func TestNewUUID(t *testing.T) {
	a, b := NewUUID(), NewUUID()
	if a == b || len(a) != 36 || a[14] != '4' || !wire.ValidName(a, "") {
		t.Errorf("NewUUID() = %q, %q", a, b)
	}
}

// assertOneLinePerKey checks the labels file's shape: every line is
// key=value with a known-safe key, and no key repeats.
func assertOneLinePerKey(t *testing.T, data []byte) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || !wire.ValidName(k, "") || seen[k] {
			t.Fatalf("bad or repeated line %q in\n%s", line, data)
		}
		for _, part := range strings.Split(v, ",") { // lists: gpu_uuids, invalid_labels
			if !wire.ValidName(part, "@+") {
				t.Fatalf("value of %q breaks the name rule: %q", k, v)
			}
		}
		seen[k] = true
	}
}
