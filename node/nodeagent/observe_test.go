package nodeagent

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/probestream"
)

// TestDeviceIDs: the device IDs the kubelet and runtimes give, matched to
// a whole GPU or a MIG GPU instance.
func TestDeviceIDs(t *testing.T) {
	g0 := probestream.GPU{Index: 0, UUID: "GPU-aaaa"}
	g1 := probestream.GPU{Index: 1, UUID: "GPU-bbbb", MIGMode: true}
	mi := probestream.Instance{GPUInstanceID: 2, MIGUUIDs: []string{"MIG-1111", "MIG-2222"}}
	byIndex := map[string]probestream.GPU{"0": g0, "1": g1}
	whole := []struct {
		dev  string
		want bool
	}{
		{"GPU-aaaa", true}, {"gpu-AAAA", true}, {"GPU-aaaa::3", true}, {"0", true}, {"all", true},
		{"GPU-bbbb", false}, {"1", false}, {"GPU-aaaa-x", false}, {"MIG-1111", false},
	}
	for _, c := range whole {
		if got := matchWhole(c.dev, g0, byIndex); got != c.want {
			t.Errorf("whole GPU 0, device %q: %v, want %v", c.dev, got, c.want)
		}
	}
	mig := []struct {
		dev  string
		want bool
	}{
		{"MIG-1111", true}, {"MIG-2222::1", true}, {"MIG-GPU-bbbb/2/0", true}, {"MIG-GPU-bbbb/3/0", false},
		{"GPU-bbbb", true}, {"1", true}, {"all", true}, {"MIG-3333", false}, {"GPU-aaaa", false}, {"0", false},
	}
	for _, c := range mig {
		if got := matchMIG(c.dev, g1, mi, byIndex); got != c.want {
			t.Errorf("MIG instance 2 of GPU 1, device %q: %v, want %v", c.dev, got, c.want)
		}
	}
}
