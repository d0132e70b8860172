package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fourGPUs are devices as NVML lists them, with UUIDs that share prefixes.
var fourGPUs = []Device{
	{Index: 0, UUID: "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"},
	{Index: 1, UUID: "GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01"},
	{Index: 2, UUID: "GPU-77f00000-0000-4000-8000-000000000002"},
	{Index: 3, UUID: "GPU-77f10000-0000-4000-8000-000000000003"},
}

func indices(ds []Device) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprint(d.Index)
	}
	return strings.Join(s, ",")
}

func TestVisible(t *testing.T) {
	tests := []struct {
		value   string
		want    string // NVML indices of the visible devices, in CUDA order
		errAt   int    // position of the entry reported, -1: no error
		errPart string
	}{
		{"", "", -1, ""},
		{"   ", "", -1, ""},
		{"-1", "", -1, ""},
		{"0", "0", -1, ""},
		{"3", "3", -1, ""},
		{"0,1,2,3", "0,1,2,3", -1, ""},
		{"2,0", "2,0", -1, ""},                        // CUDA order is the list's
		{" 1 , 2 ", "1,2", -1, ""},                    // whitespace around entries
		{"1,1,0,1", "1,0", -1, ""},                    // a duplicate counts once
		{"01", "1", -1, ""},                           // a number, not a string
		{"0,-1,1", "0", -1, ""},                       // -1 stops, silently
		{"4", "", 0, "no device has this index"},      // out of range
		{"1,4,2", "1", 1, "no device has this index"}, // stop at the first bad entry
		{"99999999999999999999", "", 0, "no device has this index"},
		{"0,,1", "0", 1, "not a device index"},
		{"0,abc", "0", 1, "not a device index"},
		{"+1", "", 0, "not a device index"},
		{"-2", "", 0, "not a device index"},
		{"1.0", "", 0, "not a device index"},
		{"GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01", "1", -1, ""}, // full UUID
		{"gpu-A1B2C301-8F2D-4C1B-9A3E-1C2D3E4F5A01", "1", -1, ""}, // any case
		{"GPU-77f1", "3", -1, ""},                                 // unique prefix
		{"GPU-77f1,GPU-a1b2c300", "3,0", -1, ""},
		{"GPU-77f1,3", "3", -1, ""},                   // same device by prefix and index
		{"GPU-a1b2c3", "", 0, "more than one device"}, // ambiguous prefix
		{"0,GPU-", "0", 1, "more than one device"},
		{"GPU-ffff", "", 0, "no device's UUID starts with this"},
		{"2,GPU-ffff,1", "2", 1, "no device's UUID starts with this"},
		{"MIG-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00", "", 0, "MIG"},
		{"a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00", "", 0, "not a device index"}, // CUDA wants the GPU- prefix
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := Visible(fourGPUs, tt.value)
			if indices(got) != tt.want {
				t.Errorf("Visible(%q) = [%s], want [%s]", tt.value, indices(got), tt.want)
			}
			var ve *VisibleError
			switch {
			case tt.errAt < 0 && err != nil:
				t.Errorf("Visible(%q): unexpected error %v", tt.value, err)
			case tt.errAt >= 0 && !errors.As(err, &ve):
				t.Errorf("Visible(%q): error %v, want a *VisibleError", tt.value, err)
			case tt.errAt >= 0:
				if ve.Position != tt.errAt || !strings.Contains(ve.Reason, tt.errPart) {
					t.Errorf("Visible(%q): error at %d %q, want at %d containing %q", tt.value, ve.Position, ve.Reason, tt.errAt, tt.errPart)
				}
				if !strings.Contains(err.Error(), "CUDA_VISIBLE_DEVICES") {
					t.Errorf("error %q does not name the variable", err)
				}
			}
		})
	}
}

func TestVisibleDevicesWithoutUUID(t *testing.T) {
	// Devices counted from device nodes have no UUID: indices still work,
	// UUID entries match nothing.
	nodes := []Device{{Index: 0}, {Index: 1}}
	if got, err := Visible(nodes, "1"); indices(got) != "1" || err != nil {
		t.Errorf("Visible(nodes, 1) = [%s], %v", indices(got), err)
	}
	if got, err := Visible(nodes, "GPU-"); len(got) != 0 || err == nil {
		t.Errorf("Visible(nodes, GPU-) = [%s], %v; want nothing and an error", indices(got), err)
	}
}

func FuzzVisible(f *testing.F) {
	for _, s := range []string{"", "-1", "0,1", "3,2,1,0", "GPU-a1", "GPU-77f1,0,GPU-", "1,,2", " 0 ,\t1", "MIG-x", "0,0,0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := Visible(fourGPUs, value)
		if len(got) > len(fourGPUs) {
			t.Fatalf("%d devices visible out of %d", len(got), len(fourGPUs))
		}
		seen := map[int]bool{}
		for _, d := range got {
			if seen[d.Index] {
				t.Fatalf("device %d listed twice for %q", d.Index, value)
			}
			seen[d.Index] = true
			if d != fourGPUs[d.Index] {
				t.Fatalf("device %d altered: %+v", d.Index, d)
			}
		}
		// Every visible device was named by an entry before the first bad
		// one, so the entries count bounds the result.
		if n := strings.Count(value, ",") + 1; len(got) > n {
			t.Fatalf("%d devices from %d entries", len(got), n)
		}
		var ve *VisibleError
		if err != nil && !errors.As(err, &ve) {
			t.Fatalf("error of type %T", err)
		}
		// Appending entries after a bad one changes nothing.
		if ve != nil {
			more, _ := Visible(fourGPUs, value+",0,1,2,3")
			if indices(more) != indices(got) {
				t.Fatalf("entries after the bad one were used: %q gave [%s], with more [%s]", value, indices(got), indices(more))
			}
		}
	})
}

func BenchmarkVisible(b *testing.B) {
	devs := make([]Device, 8)
	for i := range devs {
		devs[i] = Device{Index: i, UUID: fmt.Sprintf("GPU-a1b2c3%02x-8f2d-4c1b-9a3e-1c2d3e4f5a%02x", i, i)}
	}
	for _, value := range []string{"0,1,2,3,4,5,6,7", "GPU-a1b2c307,GPU-a1b2c306,GPU-a1b2c305,GPU-a1b2c304"} {
		b.Run(strings.SplitN(value, ",", 2)[0], func(b *testing.B) {
			for b.Loop() {
				Visible(devs, value)
			}
		})
	}
}
