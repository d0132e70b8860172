package monitor

import (
	"math"
	"strconv"
)

// The chart's value axis: round, distinct ticks. The step is 1, 2 or 5
// times a power of ten, chosen so that the axis has at most four steps
// above 0; the axis ends at the first tick at or above the top value.
// Each label has as many decimals as the step needs and no more, so two
// ticks never read the same (the earlier axis split [0, 2] in quarters
// and printed them without decimals: 2, 2, 1, 0, 0).

// axisTicks returns the ticks from 0 up to the axis's end, and that end
// (the value the plot's full height stands for). minStep is the smallest
// step allowed (1 for money, where the axis counts whole units once the
// top reaches one; 0 for none). A top of 0 (nothing to draw) gives one
// tick, 0, and an end of 0.
func axisTicks(top, minStep float64) (ticks []float64, end float64) {
	if top <= 0 || math.IsNaN(top) || math.IsInf(top, 0) {
		return []float64{0}, 0
	}
	step := niceStep(top / 4)
	if top >= minStep {
		step = math.Max(step, minStep)
	}
	n := int(math.Ceil(top/step - 1e-9))
	for i := 0; i <= n; i++ {
		ticks = append(ticks, roundTo(float64(i)*step, step))
	}
	return ticks, ticks[n]
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if x <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// stepDecimals is how many decimals a tick at a multiple of step needs:
// 0 for steps of 1 and above, 1 for 0.5 or 0.2, 2 for 0.05...
func stepDecimals(step float64) int {
	if step <= 0 || step >= 1 {
		return 0
	}
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

// roundTo removes the binary noise of i*step (0.30000000000000004).
func roundTo(v, step float64) float64 {
	p := math.Pow(10, float64(stepDecimals(step)))
	return math.Round(v*p) / p
}

// tickLabel writes a tick of an axis whose step is step (the axis's foot
// plainly "0").
func tickLabel(v, step float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', stepDecimals(step), 64)
}
