package dockerapi

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestDevices(t *testing.T) {
	cases := []struct {
		name, inspect string
		want          []string
	}{
		{"explicit IDs of the NVIDIA driver", `{"HostConfig":{"DeviceRequests":[{"Driver":"nvidia","DeviceIDs":["GPU-a","MIG-b"]}]}}`, []string{"GPU-a", "MIG-b"}},
		{"count -1 with the gpu capability", `{"HostConfig":{"DeviceRequests":[{"Count":-1,"Capabilities":[["gpu","utility"]]}]}}`, []string{"all"}},
		{"count 2: the first two", `{"HostConfig":{"DeviceRequests":[{"Driver":"nvidia","Count":2}]}}`, []string{"0", "1"}},
		{"another driver's request", `{"HostConfig":{"DeviceRequests":[{"Driver":"other","DeviceIDs":["x"]}]}}`, nil},
		{"NVIDIA_VISIBLE_DEVICES", `{"Config":{"Env":["A=1","NVIDIA_VISIBLE_DEVICES=0, MIG-c ,GPU-d"]}}`, []string{"0", "MIG-c", "GPU-d"}},
		{"device requests win over the variable", `{"Config":{"Env":["NVIDIA_VISIBLE_DEVICES=all"]},"HostConfig":{"DeviceRequests":[{"Driver":"nvidia","DeviceIDs":["GPU-a"]}]}}`, []string{"GPU-a"}},
		{"none", `{"Config":{"Env":["NVIDIA_VISIBLE_DEVICES=none"]}}`, nil},
		{"void", `{"Config":{"Env":["NVIDIA_VISIBLE_DEVICES=void"]}}`, nil},
		{"nothing", `{}`, nil},
	}
	for _, c := range cases {
		var in inspect
		if err := json.Unmarshal([]byte(c.inspect), &in); err != nil {
			t.Fatal(err)
		}
		if got := devices(in); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
