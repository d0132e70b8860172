package focus

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/csvout"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

func TestCell(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"search_ranking", "search_ranking"},
		{"=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"},
		{"+a1", "'+a1"}, {"-a1", "'-a1"}, {"-1.5", "-1.5"}, {"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"}, {"\rx", "'\rx"}, {"", ""}, {"'quoted", "'quoted"},
	} {
		got := csvout.Cell(c.in)
		if got != c.want {
			t.Errorf("csvout.Cell(%q) = %q, want %q", c.in, got, c.want)
		}
		if back := uncell(got); back != c.in {
			t.Errorf("uncell(csvout.Cell(%q)) = %q", c.in, back)
		}
	}
}

func TestCheckPrices(t *testing.T) {
	for _, c := range []struct {
		currency string
		ok       bool
	}{{"EUR", true}, {"CNY", true}, {"eur", false}, {"yuan", false}, {"€", false}, {"", false}, {"EURO", false}} {
		p, err := report.ParsePrices(strings.NewReader(`{"currency":"` + c.currency + `","models":{"x":1}}`))
		if err != nil {
			if c.ok {
				t.Fatalf("%q: %v", c.currency, err)
			}
			continue
		}
		if err := CheckPrices(p); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrCurrency)) {
			t.Errorf("CheckPrices(%q) = %v", c.currency, err)
		}
	}
	if err := CheckPrices(nil); !errors.Is(err, ErrCurrency) {
		t.Errorf("no prices: %v", err)
	}
}

// export is a small export by hand: a project's row, a hostile project's
// and the platform's.
func export() *Export {
	day := time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC)
	m := facts.Window{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	q, p := 2.5, 4.0
	row := func(project, owner string) Row {
		return Row{BilledCost: 10, BillingCurrency: "EUR", BillingPeriodStart: m.From, BillingPeriodEnd: m.To,
			ChargePeriodStart: day, ChargePeriodEnd: day.AddDate(0, 0, 1), ChargeCategory: "Usage", ConsumedQuantity: &q,
			ConsumedUnit: UnitGPUHours, PricingQuantity: &q, PricingUnit: UnitGPUHours, ListUnitPrice: &p, SkuID: "NVIDIA H200",
			SubAccountID: project, SubAccountName: project, Tags: map[string]string{"paddle/owner": owner}, owner: owner,
			BillingBasis: "observed", LedgerState: "attributed"}
	}
	plat := row("platform", "")
	plat.Tags, plat.BillingBasis, plat.LedgerState = nil, "", "unobserved"
	return &Export{Month: "2026-11", Window: m, Rows: []Row{row("search_a", "ann@example.com"), row("=evil", "bob"), plat}}
}

func TestWriteAndFilter(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, export(), Settings{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != strings.Join(Columns, ",") {
		t.Fatalf("export:\n%s", out)
	}
	for _, want := range []string{
		"10,paddle-monitor,paddle-monitor,EUR,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,Usage,,,Usage-Based,2026-11-10T00:00:00Z,2026-11-11T00:00:00Z,2.5,GPU-Hours,10,4,10,paddle-monitor,,paddle-monitor,10,4,Standard,2.5,GPU-Hours,",
		`,'=evil,'=evil,"{""paddle/owner"":""bob""}",`,
		",platform,platform,,,,,,,,,,unobserved,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %q:\n%s", want, out)
		}
	}
	// A team's part of a kept export: its projects and owners, never the
	// platform's rows, cells as they were.
	for _, c := range []struct {
		scope *access.Scope
		want  []string
	}{
		{&access.Scope{Projects: []string{"search_*"}}, []string{"search_a"}},
		{&access.Scope{Projects: []string{"*"}}, []string{"search_a", "'=evil"}},
		{&access.Scope{Projects: []string{"*"}, Owners: []string{"bob"}}, []string{"'=evil"}},
		{&access.Scope{Projects: []string{"=evil"}}, []string{"'=evil"}},
		{&access.Scope{Projects: []string{"ads_*"}}, nil},
	} {
		got, err := filterCSV(b.Bytes(), c.scope, "platform")
		if err != nil {
			t.Fatal(err)
		}
		rows := strings.Split(strings.TrimSpace(string(got)), "\n")
		if rows[0] != lines[0] || len(rows)-1 != len(c.want) {
			t.Errorf("%v: %d rows:\n%s", c.scope, len(rows)-1, got)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(rows[i+1], ","+w+","+w+",") {
				t.Errorf("%v: row %d %q, want %s", c.scope, i, rows[i+1], w)
			}
		}
	}
}

func TestGzipIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, export(), Settings{}, FormatCSVGz); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a time in the header would differ now
	if err := Write(&b, export(), Settings{}, FormatCSVGz); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("two gzip exports of the same rows differ")
	}
	zr, err := gzip.NewReader(&a)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	var c bytes.Buffer
	WriteCSV(&c, export(), Settings{})
	if !bytes.Equal(plain, c.Bytes()) || zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("the gzip stream is not the CSV, or carries a name or time")
	}
}
