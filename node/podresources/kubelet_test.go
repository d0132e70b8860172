package podresources

import (
	"reflect"
	"testing"

	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
)

func TestIsGPUResource(t *testing.T) {
	for name, want := range map[string]bool{
		"nvidia.com/gpu": true, "nvidia.com/gpu.shared": true, "nvidia.com/mig-1g.10gb": true,
		"nvidia.com/mig-3g.40gb.shared": true, "nvidia.com/gpus": false, "example.com/gpu": false,
		"nvidia.com/migrate": false, "": false,
	} {
		if got := IsGPUResource(name); got != want {
			t.Errorf("IsGPUResource(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestClaimDevices: a container's DRA claims flatten to their devices,
// with the share ID where the kubelet gives one.
func TestClaimDevices(t *testing.T) {
	share := "s-1"
	got := claimDevices([]*podresourcesapi.DynamicResource{
		{ClaimNamespace: "ns", ClaimName: "c", ClaimResources: []*podresourcesapi.ClaimResource{
			{DriverName: "gpu.nvidia.com", PoolName: "n1", DeviceName: "gpu-0", ShareId: &share,
				CdiDevices: []*podresourcesapi.CDIDevice{{Name: "k8s.gpu.nvidia.com/device=gpu-0"}}},
			{DriverName: "gpu.nvidia.com", PoolName: "n1", DeviceName: "gpu-1"}}},
	})
	want := []allocation.ClaimDevice{
		{ClaimNamespace: "ns", ClaimName: "c", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0", ShareID: "s-1", CDIDevices: []string{"k8s.gpu.nvidia.com/device=gpu-0"}},
		{ClaimNamespace: "ns", ClaimName: "c", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v, want %+v", got, want)
	}
	if claimDevices(nil) != nil {
		t.Error("no claims: want nil")
	}
}
