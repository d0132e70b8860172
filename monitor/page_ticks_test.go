package monitor

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestAxisTicks(t *testing.T) {
	for _, tt := range []struct {
		name    string
		top     float64
		minStep float64
		labels  string
		end     float64
	}{
		// The chart of the issue: a top of 2 read 2, 2, 1, 0, 0.
		{"money, 2", 2, 1, "0 1 2", 2},
		{"GPU-hours, 2", 2, 0, "0 0.5 1.0 1.5 2.0", 2},
		{"money, 1734", 1734, 1, "0 500 1000 1500 2000", 2000},
		{"money, 7", 7, 1, "0 2 4 6 8", 8},
		{"money, 10", 10, 1, "0 5 10", 10},
		{"money, 100", 100, 1, "0 50 100", 100},
		{"money, 4", 4, 1, "0 1 2 3 4", 4},
		{"money under one unit", 0.3, 1, "0 0.1 0.2 0.3", 0.3},
		{"GPU-hours, 0.07", 0.07, 0, "0 0.02 0.04 0.06 0.08", 0.08},
		{"a million and one", 1e6 + 1, 1, "0 500000 1000000 1500000", 1.5e6},
		{"nothing", 0, 1, "0", 0},
		{"negative", -5, 1, "0", 0},
		{"not a number", math.NaN(), 1, "0", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ticks, end := axisTicks(tt.top, tt.minStep)
			step := 0.0
			if len(ticks) > 1 {
				step = ticks[1]
			}
			var labels []string
			for _, v := range ticks {
				labels = append(labels, tickLabel(v, step))
			}
			if got := strings.Join(labels, " "); got != tt.labels || end != tt.end {
				t.Errorf("axisTicks(%v) = %q up to %v, want %q up to %v", tt.top, got, end, tt.labels, tt.end)
			}
		})
	}
}

// For any top: 3 to 5 ticks from 0, evenly spaced by 1, 2 or 5 times a
// power of ten, the last at or above the top, no two labels alike.
func TestAxisTicksAlwaysRoundAndDistinct(t *testing.T) {
	for _, minStep := range []float64{0, 1} {
		for top := 0.013; top < 3e7; top *= 1.07 {
			ticks, end := axisTicks(top, minStep)
			if len(ticks) < 2 || len(ticks) > 5 || ticks[0] != 0 || end != ticks[len(ticks)-1] || end < top {
				t.Fatalf("top %v: ticks %v end %v", top, ticks, end)
			}
			step := ticks[1]
			m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
			if !slices.ContainsFunc([]float64{1, 2, 5}, func(x float64) bool { return math.Abs(m-x) < 1e-6 }) {
				t.Fatalf("top %v: step %v is not 1, 2 or 5 times a power of ten", top, step)
			}
			seen := map[string]bool{}
			for i, v := range ticks {
				if math.Abs(v-float64(i)*step) > step*1e-6 {
					t.Fatalf("top %v: tick %d is %v, want %v", top, i, v, float64(i)*step)
				}
				l := tickLabel(v, step)
				if seen[l] {
					t.Fatalf("top %v: label %q twice in %v", top, l, ticks)
				}
				seen[l] = true
			}
		}
	}
}
