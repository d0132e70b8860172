package monitor

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

func TestGPUsText(t *testing.T) {
	gi := int64(1)
	for _, c := range []struct {
		count int64
		gpus  []store.OpenGPU
		want  string
	}{
		{0, nil, "0"},
		{2, nil, "2"}, // device nodes: counted, not listed
		{2, []store.OpenGPU{{Share: 1}, {Share: 1}}, "2"},
		{1, []store.OpenGPU{{Share: 0.25}}, "0.25"},
		{1, []store.OpenGPU{{GPUInstanceID: &gi, Profile: "1g.10gb", Share: 1.0 / 7}}, "1g.10gb"},
		{2, []store.OpenGPU{{Share: 1}, {GPUInstanceID: &gi, Profile: "3g.71gb", Share: 3.0 / 7}}, "1 + 3g.71gb"},
		{3, []store.OpenGPU{{Share: 0.5}}, "2 + 0.5"},
	} {
		if got := gpusText(store.OpenTask{GPUCount: c.count, GPUs: c.gpus}); got != c.want {
			t.Errorf("gpusText(%d, %+v) = %q, want %q", c.count, c.gpus, got, c.want)
		}
	}
}

func TestChange(t *testing.T) {
	for _, c := range []struct {
		now, before float64
		want        string
	}{
		{230, 192, "+20 %"}, {401, 18, ">+999 %"}, {50, 100, "−50 %"}, {100, 100, "0 %"}, {5, 0, "new"}, {0, 0, "0 %"}, {0, 10, "−100 %"},
	} {
		if got := change(c.now, c.before); got != c.want {
			t.Errorf("change(%v, %v) = %q, want %q", c.now, c.before, got, c.want)
		}
	}
}
