package ledger

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/termtable"
)

func fptr(x float64) *float64 { return &x }

var updateTable = flag.Bool("update", false, "rewrite the table golden files")

// tableLedger is a month by node with prices: a node name longer than 32
// characters, capacity 720 GPU-hours split into the five states.
func tableLedger() *Ledger {
	fig := func(capacity float64, states [5]float64, price float64) Figures {
		f := Figures{Capacity: fptr(capacity), States: states, Check: fptr(0), priced: true}
		sum := 0.0
		for i, h := range states {
			f.StateCosts[i] = fptr(h * price)
			sum += h * price
		}
		f.CapacityCost = fptr(sum)
		return f
	}
	return &Ledger{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		By: ByNode, Split: "even", Currency: "CNY",
		Rows: []Row{
			{Key: "gpu-node-with-a-very-long-name-in-rack-17.cluster.example.com", Figures: fig(5760, [5]float64{4000.5, 120.25, 3.333, 1500, 136}, 12)},
			{Key: "n2", Figures: fig(720, [5]float64{700, 0, 0, 20, 0}, 2)},
		},
		Total: fig(6480, [5]float64{4700.5, 120.25, 3.333, 1520, 136}, 12),
	}
}

// The ledger's table at 120 columns (golden), with --columns and --wide:
// keys shortened with …, hours with 3 significant digits, money with 2
// decimals, the states' costs only with --wide.
func TestLedgerTable(t *testing.T) {
	for _, c := range []struct {
		name  string
		opt   termtable.Options
		width int
	}{
		{"ledger-120", termtable.Options{}, 120},
		{"ledger-columns", termtable.Options{Columns: []string{"attributed_gpu_hours", "attributed_cost"}}, 120},
		{"ledger-wide", termtable.Options{Wide: true}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got bytes.Buffer
			if err := WriteTable(&got, tableLedger(), c.opt); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", c.name+".txt")
			if *updateTable {
				os.MkdirAll("testdata", 0o755)
				os.WriteFile(golden, got.Bytes(), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s differs:\n%s", golden, got.String())
			}
			for _, line := range strings.Split(got.String(), "\n") {
				if n := utf8.RuneCountInString(line); c.width > 0 && n > c.width {
					t.Errorf("line of %d characters: %q", n, line)
				}
			}
		})
	}
	var b bytes.Buffer
	WriteTable(&b, tableLedger(), termtable.Options{})
	// 4000.5 hours to 3 significant digits (all the integer ones): 4000
	// (half to even); 3.333: 3.33.
	for _, want := range []string{"gpu-node-with-a-very-long-name-…", " 4000 ", " 120 ", " 3.33\n", "\nTOTAL ",
		"Too wide for 120 columns, --wide shows: unallocated_gpu_hours,"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WriteTable(&b, tableLedger(), termtable.Options{Wide: true})
	// The capacity's cost: 4000.5 + 120.25 + 3.333 + 1500 + 136 = 5760.083
	// GPU-hours at 12.
	for _, want := range []string{" 69121.00 ", "unobserved_cost"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("wide table lacks %q:\n%s", want, b.String())
		}
	}
}
