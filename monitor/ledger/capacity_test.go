package ledger_test

import (
	"slices"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// TestCapacity: a GPU's capacity is the union of its lives' spans, each
// ended by --node-retire after its last report, by its end and by the cut
// (the window's end or now), from the window's start; by hand.
func TestCapacity(t *testing.T) {
	ended := int64(250)
	d := &store.LedgerData{Lives: []store.GPULife{
		{Node: "n", UUID: "GPU-a", Model: "H200", FirstStart: 0, LastEnd: 100},     // retired at 130
		{Node: "n", UUID: "GPU-a", FirstStart: 120, LastEnd: 200, EndedAt: &ended}, // ends at 230 by retire
		{Node: "n", UUID: "GPU-a", FirstStart: 300, LastEnd: 900},                  // cut at 500
		{Node: "n", UUID: "GPU-b", Model: "A100", FirstStart: 600, LastEnd: 700},   // after the cut
	}}
	spans, model := ledger.Capacity(d, 50, 500, 30)
	a := ledger.GPU{Node: "n", UUID: "GPU-a"}
	if got, want := spans[a], [][2]int64{{50, 230}, {300, 500}}; !slices.Equal(got, want) {
		t.Errorf("GPU-a: %v, want %v", got, want)
	}
	if _, ok := spans[ledger.GPU{Node: "n", UUID: "GPU-b"}]; ok || model[a] != "H200" {
		t.Errorf("spans %v, models %v", spans, model)
	}
}
