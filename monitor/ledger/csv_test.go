package ledger

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLedgerCSVFormulaRule: a GPU model a spreadsheet would run (NVML's
// name is free text) is written with a leading ', as the report's CSV
// writes it; the figures and the total line are written as they are.
func TestLedgerCSVFormulaRule(t *testing.T) {
	f := Figures{Capacity: fptr(2), States: [5]float64{1.5, 0, 0, 0.5, 0}, Check: fptr(0)}
	l := &Ledger{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		By: ByModel, Split: "even",
		Rows:  []Row{{Key: `=HYPERLINK("http://evil.example/","A100")`, Figures: f}, {Key: "-2+3", Figures: f}},
		Total: f,
	}
	var b bytes.Buffer
	if err := Write(&b, l, "csv"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, two rows and the total, got:\n%s", b.String())
	}
	tail := ",2,1.5,0,0,0.5,0,0"
	for i, want := range []string{
		`"'=HYPERLINK(""http://evil.example/"",""A100"")"` + tail,
		`'-2+3` + tail,
		`total` + tail,
	} {
		if lines[i+1] != want {
			t.Errorf("line %d:\n got %s\nwant %s", i+2, lines[i+1], want)
		}
	}
}
