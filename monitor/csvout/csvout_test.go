package csvout

import (
	"bytes"
	"testing"
)

// TestWriterFormulaRule: the bytes written for hostile and ordinary cells.
func TestWriterFormulaRule(t *testing.T) {
	cases := []struct {
		name string
		cell string
		want string
	}{
		{"hyperlink formula", `=HYPERLINK("http://x","y")`, `"'=HYPERLINK(""http://x"",""y"")"` + "\n"},
		{"plus", "+1+2", "'+1+2\n"},
		{"plus number", "+1", "'+1\n"},
		{"minus formula", "-2+3", "'-2+3\n"},
		{"at", "@SUM(A1)", "'@SUM(A1)\n"},
		{"tab", "\tx", "'\tx\n"},
		{"carriage return", "\rx", "\"'\rx\"\n"},
		{"negative figure", "-1.5", "-1.5\n"},
		{"exponent figure", "-2e-3", "-2e-3\n"},
		{"minus alone", "-", "'-\n"},
		{"minus dot", "-1.", "'-1.\n"},
		{"plain text", "A100-SXM4-80GB", "A100-SXM4-80GB\n"},
		{"empty", "", "\n"},
		{"equals inside", "a=b", "a=b\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b)
			if err := w.Write([]string{c.cell}); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			if err := w.Error(); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("Write(%q) wrote %q, want %q", c.cell, b.String(), c.want)
			}
		})
	}
}

// TestWriteKeepsRecord: the caller's record is not rewritten in place.
func TestWriteKeepsRecord(t *testing.T) {
	rec := []string{"=1", "ok"}
	w := NewWriter(&bytes.Buffer{})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if rec[0] != "=1" {
		t.Errorf("record changed to %q", rec)
	}
}
