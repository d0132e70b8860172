package monitor

import "testing"

func TestSignificant(t *testing.T) {
	for x, want := range map[float64]string{
		0:          "0.0",
		1234.5:     "1234.5",
		100:        "100.0",
		99.94:      "99.9",
		22:         "22.0",
		6.5:        "6.50",
		1.234:      "1.23",
		0.5:        "0.500",
		0.0123:     "0.0123",
		0.00083333: "0.000833",
		-0.25:      "-0.250",
	} {
		if got := significant(x); got != want {
			t.Errorf("significant(%v) = %q, want %q", x, got, want)
		}
	}
}
