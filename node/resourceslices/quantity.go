package resourceslices

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// suffixes of a Kubernetes quantity, longest first.
var suffixes = []struct {
	s string
	m float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
	{"n", 1e-9}, {"u", 1e-6}, {"m", 1e-3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
}

// parseQuantity reads a Kubernetes quantity ("80Gi", "500m", "1.5", "1e3")
// as a number; DRA's capacities and consumed capacities are written so.
func parseQuantity(q string) (float64, error) {
	s := strings.TrimSpace(q)
	mult := 1.0
	for _, x := range suffixes {
		if rest, ok := strings.CutSuffix(s, x.s); ok && rest != "" && strings.ContainsAny(rest[len(rest)-1:], "0123456789.") {
			// "1E" is an exponent without digits only when followed by
			// some; "1E" alone is exa.
			s, mult = rest, x.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("quantity %q is not a non-negative number", q)
	}
	return v * mult, nil
}
