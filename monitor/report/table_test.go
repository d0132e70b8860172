package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

func f64(x float64) *float64 { return &x }

// tableReport is a report by project and owner over November with prices
// and budgets: a key longer than 32 characters, a cost budget forecast
// far past its limit, a GPU-hour budget of 0.05 GPU-hours.
func tableReport() *Report {
	cny := "CNY"
	return &Report{From: nov.From, To: nov.To, By: []string{"project", "owner"}, Currency: &cny, Metrics: []string{"accuracy"},
		Rows: []Row{
			{Key: key("project", "recommendation_ranking_experiments_2026", "owner", "alice.wonderland@example.com"),
				Figures: Figures{Tasks: 12, CompletedTasks: 10, FailedTasks: 3, OpenTasks: 2, GPUHours: 1234.5678, FailedGPUHours: 20.25,
					IdleGPUHours: 11, UtilMean: f64(61.24), WasteShare: f64(0.02531), DurationEstHours: 30, DurationActualHours: 41.5,
					Cost: f64(14814.8136), EnergyKWh: f64(12.5), Metrics: map[string]MetricMean{"accuracy": {Mean: f64(0.91), Tasks: 4}}},
				Budget: &BudgetFigures{Kind: "cost", Limit: 1000, Used: 14814.8136, UsedShare: f64(14.8148136), Forecast: 20000.004, ForecastShare: f64(20.000004)}},
			{Key: key("project", "nlp", "owner", ""),
				Figures: Figures{Tasks: 1, OpenTasks: 1, GPUHours: 0.0123456, Cost: f64(0.0246912), Metrics: map[string]MetricMean{"accuracy": {Tasks: 0}}},
				Budget:  &BudgetFigures{Kind: "gpu_hours", Limit: 0.05, Used: 0.0123456, UsedShare: f64(0.246912), Forecast: 0.04, ForecastShare: f64(0.8)}},
		},
		Total: Figures{Tasks: 13, CompletedTasks: 10, FailedTasks: 3, OpenTasks: 3, GPUHours: 1234.5801456, FailedGPUHours: 20.25, IdleGPUHours: 11,
			UtilMean: f64(61.24), WasteShare: f64(0.0253), DurationEstHours: 30, DurationActualHours: 41.5, Cost: f64(14814.8382912),
			EnergyKWh: f64(12.5), Metrics: map[string]MetricMean{"accuracy": {Mean: f64(0.91), Tasks: 4}}},
	}
}

// The table's bytes at 120 columns (the default), at 80 (columns left out,
// right to left, with a note), with --columns and with --wide: golden
// files, -update rewrites them. Every line of the default ones fits.
func TestTableGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		opt   TableOptions
		width int // every line at most this long; 0: not checked
	}{
		{"table-120", TableOptions{}, 120},
		{"table-80", TableOptions{Width: 80}, 0},
		{"table-columns", TableOptions{Columns: []string{"cost", "budget_forecast", "budget_forecast_share", "idle_gpu_hours"}}, 0},
		{"table-wide", TableOptions{Wide: true}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got bytes.Buffer
			if err := WriteTableWith(&got, tableReport(), c.opt); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", c.name+".txt")
			if *update {
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
					t.Errorf("line of %d characters, want at most %d: %q", n, c.width, line)
				}
			}
		})
	}
}

// What the golden files hold, said in words: the long key shortened with
// "…" in the table only, money with 2 decimals, hours with 3 significant
// digits, a 0.05 GPU-hour budget not rounded to 0.1, a forecast past
// 999 % as ">999 %" with its amount.
func TestTableFigures(t *testing.T) {
	var tb, js, csv bytes.Buffer
	r := tableReport()
	WriteTable(&tb, r)
	WriteJSON(&js, r)
	WriteCSV(&csv, r)
	table := tb.String()
	for _, want := range []string{
		"recommendation_ranking_experime… ", "alice.wonderland@example.com ", " 1235 ", " 14814.81 ", " 2.5 % ", " 61.2\n",
		" 0.0123 ", " 0.02 ", "budget nlp: gpu_hours 0.0123 of 0.0500 (24.7 %), forecast 0.0400 (80.0 %)",
		"forecast 20000.00 (>999 %)", "cost 14814.81 of 1000.00 (>999 %)",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	for _, want := range []string{"recommendation_ranking_experiments_2026", "1234.5678", "14814.8136", "0.0123456"} {
		if !strings.Contains(js.String(), want) || !strings.Contains(csv.String(), want) {
			t.Errorf("JSON or CSV lacks the full %q", want)
		}
	}
	if strings.Contains(js.String(), "…") || strings.Contains(csv.String(), "…") {
		t.Error("a key shortened outside the table")
	}
}

func TestTableColumnsErrors(t *testing.T) {
	r := tableReport()
	if err := CheckColumns(r, []string{"cost", "budget_used"}); err != nil {
		t.Errorf("known columns: %v", err)
	}
	err := CheckColumns(r, []string{"cost", "gpu_hour"})
	qe, ok := errors.AsType[*facts.QueryError](err)
	if !ok || qe.Param != "columns" || !errors.Is(err, facts.ErrBadQuery) ||
		!strings.Contains(err.Error(), `unknown column "gpu_hour": allowed: project, owner, tasks,`) ||
		!strings.Contains(err.Error(), "budget_forecast_share") {
		t.Errorf("unknown column: %v", err)
	}
	r.Currency = nil
	if err := CheckColumns(r, []string{"cost"}); !errors.Is(err, facts.ErrBadQuery) {
		t.Errorf("cost without prices: %v", err)
	}
}
