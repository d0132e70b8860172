package launch

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// gpu_seconds is gpuShares × the duration: the figures worked by hand.
func TestGPUShares(t *testing.T) {
	tests := []struct {
		name    string
		devices []gpu.Device
		count   int
		want    float64
	}{
		{"no GPU", nil, 0, 0},
		{"two whole GPUs", []gpu.Device{{Share: 1}, {Share: 1}}, 2, 2},
		{"time-sliced quarter", []gpu.Device{{Share: 0.25}}, 1, 0.25},
		{"share out of range counts whole", []gpu.Device{{Share: 0}, {Share: 1.5}, {Share: -1}}, 3, 3},
		{"one probed, two counted from device nodes", []gpu.Device{{Share: 0.5}}, 3, 2.5},
		{"count below the devices adds nothing", []gpu.Device{{Share: 0.5}, {Share: 0.5}}, 1, 1},
	}
	for _, tt := range tests {
		if got := gpuShares(tt.devices, tt.count); got != tt.want {
			t.Errorf("%s: gpuShares = %v, want %v", tt.name, got, tt.want)
		}
	}
}
