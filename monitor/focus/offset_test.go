package focus

import (
	"math"
	"slices"
	"testing"
)

func TestSubtract(t *testing.T) {
	for _, c := range []struct {
		a, b, want [][2]int64
	}{
		{[][2]int64{{0, 100}}, nil, [][2]int64{{0, 100}}},
		{[][2]int64{{0, 100}}, [][2]int64{{0, 100}}, nil},
		{[][2]int64{{0, 100}}, [][2]int64{{10, 20}, {30, 40}}, [][2]int64{{0, 10}, {20, 30}, {40, 100}}},
		{[][2]int64{{0, 50}, {60, 100}}, [][2]int64{{40, 70}}, [][2]int64{{0, 40}, {70, 100}}},
		{[][2]int64{{10, 20}}, [][2]int64{{0, 5}, {25, 30}}, [][2]int64{{10, 20}}},
		{[][2]int64{{10, 20}}, [][2]int64{{0, 15}}, [][2]int64{{15, 20}}},
	} {
		if got := subtract(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("subtract(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestAbsorb: one GPU at 10 an hour, unobserved [0, 3600) and [7200,
// 10800); figures by hand in GPU-seconds and money × seconds / hour.
func TestAbsorb(t *testing.T) {
	un := [][2]int64{{0, 3600}, {7200, 10800}}
	for _, c := range []struct {
		name        string
		uses        []declaredUse
		hours, cost float64
	}{
		{"none", nil, 0, 0},
		// Half a GPU over the whole unobserved first hour: 1800 s, 5 × 3600.
		{"half", []declaredUse{{0, 3600, 0.5, 5}}, 1800, 5 * 3600},
		// Over [1800, 9000): 1800 s of the first span, 1800 of the second;
		// the observed hour between absorbs nothing.
		{"across the observed hour", []declaredUse{{1800, 9000, 1, 10}}, 3600, 10 * 3600},
		// Two whole declarations of one GPU: never more than the GPU, and
		// never more than its price.
		{"twice", []declaredUse{{0, 3600, 1, 10}, {0, 3600, 1, 10}}, 3600, 10 * 3600},
		// A cheaper declaration (a share priced 2) and a dearer one (20):
		// the unobserved price bounds the money.
		{"cheap", []declaredUse{{0, 3600, 1, 2}}, 3600, 2 * 3600},
		{"dear", []declaredUse{{0, 3600, 1, 20}}, 3600, 10 * 3600},
		// Outside the unobserved spans: nothing.
		{"outside", []declaredUse{{3600, 7200, 1, 10}, {10800, 20000, 1, 10}}, 0, 0},
	} {
		h, m := absorb(un, c.uses, 10)
		if math.Abs(h-c.hours) > 1e-9 || math.Abs(m-c.cost) > 1e-9 {
			t.Errorf("%s: absorb = %v GPU-s, %v; want %v, %v", c.name, h, m, c.hours, c.cost)
		}
	}
}
