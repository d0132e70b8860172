package gate

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		expr string
		want string // comparisons as key op value; "" for an error
	}{
		{"accuracy>=0.95", "accuracy >= 0.95"},
		{"accuracy >= 0.95 , loss<3e-1", "accuracy >= 0.95|loss < 0.3"},
		{"eval.top-1_acc>.9", "eval.top-1_acc > 0.9"},
		{"n==10", "n == 10"},
		{"n<=-1.5E+2", "n <= -150"},
		{"x>+1.", "x > 1"},
		{"A1<0", "A1 < 0"},

		{"", ""},
		{"   ", ""},
		{"accuracy", ""},
		{"accuracy>=", ""},
		{">=0.9", ""},
		{"accuracy=0.9", ""},
		{"accuracy!=0.9", ""},
		{"accuracy=>0.9", ""},
		{"accuracy>=0.9,", ""},
		{",accuracy>=0.9", ""},
		{"a>=1,,b<2", ""},
		{"accuracy>=0x1p-1", ""},
		{"accuracy>=1_000", ""},
		{"accuracy>=Inf", ""},
		{"accuracy>=NaN", ""},
		{"accuracy>=1e999", ""},
		{"accuracy>=1e", ""},
		{"accuracy>=.", ""},
		{"accuracy>=0.9 0.8", ""},
		{"accu racy>=0.9", ""},
		{"accuracy>=>0.9", ""},
		{"精度>=0.9", ""},
		{"a>=1;b<2", ""},
	}
	for _, tt := range tests {
		g, err := Parse(tt.expr)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) = %+v, %v; want a syntax error", tt.expr, g, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.expr, err)
			continue
		}
		var got []string
		for _, c := range g.Comparisons {
			got = append(got, fmt.Sprintf("%s %s %s", c.Key, c.Op, format(c.Value)))
		}
		if strings.Join(got, "|") != tt.want || g.Expr != tt.expr {
			t.Errorf("Parse(%q) = %q (expr %q), want %q", tt.expr, got, g.Expr, tt.want)
		}
	}
}

func TestReasonIsClean(t *testing.T) {
	g, _ := Parse("a>=1")
	dir := t.TempDir()
	r, _ := g.Evaluate(filepath.Join(dir, "x\nlevel=ERROR\x1b[31m"+strings.Repeat("é", 700)))
	if r.Passed || strings.ContainsAny(r.Reason, "\n\x1b") || len(r.Reason) > MaxText {
		t.Errorf("reason %q (%d bytes)", r.Reason, len(r.Reason))
	}
	if _, err := Parse("a>=1" + strings.Repeat(",a>=1", 300)); err == nil {
		t.Error("an expression over 1024 bytes was accepted")
	}
}

func TestParseErrorNamesTheComparison(t *testing.T) {
	_, err := Parse("accuracy>=0.95,loss=<0.3")
	if err == nil || !strings.Contains(err.Error(), `comparison 2 "loss=<0.3"`) {
		t.Errorf("error = %v", err)
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "metrics.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEvaluate(t *testing.T) {
	file := `{"accuracy": 0.962, "eval": {"loss": 0.21, "top5": 0.99, "name": "v3", "ok": true, "none": null,
		"per_class": [0.9, {"x": 1}]}, "epochs": 30, "big": 1e300}`
	tests := []struct {
		expr   string
		passed bool
		reason string
	}{
		{"accuracy>=0.95", true, "accuracy=0.962 >= 0.95"},
		{"accuracy>=0.95,eval.loss<0.3", true, "accuracy=0.962 >= 0.95, eval.loss=0.21 < 0.3"},
		{"accuracy>=0.97", false, "accuracy=0.962 is not >= 0.97"},
		{"accuracy>0.962", false, "accuracy=0.962 is not > 0.962"},
		{"accuracy==0.962", true, "accuracy=0.962 == 0.962"},
		{"epochs==30,eval.top5<=0.99", true, "epochs=30 == 30, eval.top5=0.99 <= 0.99"},
		{"accuracy>=0.9,eval.loss<0.2", false, "eval.loss=0.21 is not < 0.2"},
		{"recall>=0.5", false, "recall: no number under this key in "},
		{"eval.name>=0", false, "eval.name: no number under this key in "},
		{"eval>=0", false, "eval: no number under this key in "},
		{"eval.per_class.x>=0", false, "eval.per_class.x: no number under this key in "},
	}
	path := writeFile(t, file)
	wantMetrics := map[string]float64{"accuracy": 0.962, "big": 1e300, "epochs": 30, "eval.loss": 0.21, "eval.top5": 0.99}
	for _, tt := range tests {
		g, err := Parse(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		r, m := g.Evaluate(path)
		if r.Passed != tt.passed || !strings.HasPrefix(r.Reason, tt.reason) || r.Expr != tt.expr {
			t.Errorf("%s: %+v, want passed=%v reason %q", tt.expr, r, tt.passed, tt.reason)
		}
		if fmt.Sprint(m) != fmt.Sprint(wantMetrics) {
			t.Errorf("%s: metrics %v, want %v", tt.expr, m, wantMetrics)
		}
	}
}

func TestEvaluateBadFiles(t *testing.T) {
	g, _ := Parse("accuracy>=0.9")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := writeFile(t, `{"accuracy": 1, "pad": "`+strings.Repeat("x", MaxFileSize)+`"}`)
	deep := writeFile(t, strings.Repeat(`{"a":`, 40)+"1"+strings.Repeat("}", 40))
	tests := []struct {
		name, path, reason string
	}{
		{"missing", filepath.Join(dir, "nope.json"), "no such file"},
		{"directory", dir, "not a regular file"},
		{"fifo", fifo, "not a regular file"},
		{"too big", big, "larger than"},
		{"not JSON", writeFile(t, "accuracy: 0.99"), "not a JSON object"},
		{"array", writeFile(t, `[{"accuracy": 0.99}]`), "not a JSON object"},
		{"number", writeFile(t, `0.99`), "not a JSON object"},
		{"empty", writeFile(t, ``), "not a JSON object"},
		{"truncated", writeFile(t, `{"accuracy": 0.99`), "EOF"},
		{"trailing data", writeFile(t, `{"accuracy": 0.99} {}`), "data after the JSON object"},
		{"duplicate key", writeFile(t, `{"accuracy": 0.5, "accuracy": 0.99}`), `key "accuracy" appears twice`},
		{"dotted and nested", writeFile(t, `{"a.b": 1, "a": {"b": 2}, "accuracy": 1}`), `key "a.b" appears twice`},
		{"too deep", deep, "nested deeper than"},
		{"number out of range", writeFile(t, `{"accuracy": 1e999}`), "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			var r Result
			var m map[string]float64
			go func() { r, m = g.Evaluate(tt.path); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Evaluate blocked")
			}
			if r.Passed || !strings.Contains(r.Reason, tt.reason) || m != nil {
				t.Errorf("%+v, metrics %v; want failed with %q", r, m, tt.reason)
			}
		})
	}
}

func TestEvaluateKeepsFirst32Metrics(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"z": {`)
	for i := 0; i < 40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"m%02d": %d`, i, i)
	}
	b.WriteString(`}, "A": 1, "acc": 0.99, "bad key": 1, "_x": 2, "` + strings.Repeat("k", 64) + `": 3}`)
	g, _ := Parse("acc>=0.9")
	r, m := g.Evaluate(writeFile(t, b.String()))
	if !r.Passed || len(m) != MaxMetrics {
		t.Fatalf("%+v, %d metrics", r, len(m))
	}
	// Byte order: "A" < "acc" < "z.m00" ... "z.m29".
	if _, ok := m["A"]; !ok {
		t.Error("A missing")
	}
	if m["z.m29"] != 29 {
		t.Error("z.m29 missing")
	}
	if _, ok := m["z.m30"]; ok {
		t.Error("z.m30 kept: more than the first 32 keys")
	}
	for k := range m {
		if k == "bad key" || k == "_x" || len(k) > 63 {
			t.Errorf("metric %q breaks the name rule the monitor applies", k)
		}
	}
}

// FuzzParse: Parse never panics; what it accepts has only valid keys and
// finite numbers, and parses the same when written back.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"accuracy>=0.95", "a>1,b<2e-3", "x==.5", ",", "a>=", "a>=1e999", "k<=-0", "a.b-c_d<1E+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		g, err := Parse(expr)
		if err != nil {
			return
		}
		var parts []string
		for _, c := range g.Comparisons {
			for i := 0; i < len(c.Key); i++ {
				if !isKeyByte(c.Key[i]) {
					t.Fatalf("key %q accepted", c.Key)
				}
			}
			if c.Key == "" || math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
				t.Fatalf("comparison %+v accepted", c)
			}
			parts = append(parts, c.Key+string(c.Op)+format(c.Value))
		}
		again, err := Parse(strings.Join(parts, ","))
		if err != nil || len(again.Comparisons) != len(g.Comparisons) {
			t.Fatalf("written back %q: %v", strings.Join(parts, ","), err)
		}
		for i := range again.Comparisons {
			if again.Comparisons[i] != g.Comparisons[i] {
				t.Fatalf("round trip %+v != %+v", again.Comparisons[i], g.Comparisons[i])
			}
		}
	})
}
