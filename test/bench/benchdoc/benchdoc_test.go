package benchdoc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	s := Section{Name: "x", Begin: "<!-- x:begin -->", End: "<!-- x:end -->", Heading: "X", Introduction: "Intro."}
	doc := filepath.Join(t.TempDir(), "b.md")
	read := func() string {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	os.WriteFile(doc, []byte("# Benchmarks\n\nkept\n"), 0o644)
	if err := s.Write(doc, "one\n"); err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nkept\n\n## X\n\nIntro.\n\n<!-- x:begin -->\n\none\n\n<!-- x:end -->\n"
	if got := read(); got != want {
		t.Fatalf("appended:\n%q\nwant\n%q", got, want)
	}
	if err := s.Write(doc, "two\n"); err != nil {
		t.Fatal(err)
	}
	want = "# Benchmarks\n\nkept\n\n## X\n\nIntro.\n\n<!-- x:begin -->\n\ntwo\n\n<!-- x:end -->\n"
	if got := read(); got != want {
		t.Fatalf("replaced:\n%q\nwant\n%q", got, want)
	}
	os.WriteFile(doc, []byte("<!-- x:end -->\n<!-- x:begin -->\n"), 0o644)
	if err := s.Write(doc, "three\n"); err == nil || err.Error() != doc+": the x markers are broken" {
		t.Fatalf("broken markers: %v", err)
	}
}
