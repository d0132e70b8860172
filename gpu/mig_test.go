package gpu

import (
	"slices"
	"testing"
)

// FuzzSelect: whatever CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES say,
// Select never counts a GPU in MIG mode whole, never counts an entry twice,
// and returns only devices the probe reported.
func FuzzSelect(f *testing.F) {
	r := migReport()
	for _, seed := range [][2]string{
		{"", ""}, {"0", ""}, {"1,MIG-a", ""}, {"MIG-", "MIG-b"}, {"-1", ""}, {"MIG-cccc,MIG-cccc,0", "MIG-x"},
		{"GPU-1,GPU-0", ""}, {"unset", "MIG-aaaaaaaa-0000-4000-8000-000000000007"},
	} {
		f.Add(seed[0], seed[1])
	}
	migOn := map[int]bool{}
	for _, i := range r.MIGEnabled {
		migOn[i] = true
	}
	f.Fuzz(func(t *testing.T, cvd, nvidia string) {
		got, _, _ := Select(r.Devices, r.MIGDevices, migOn, cvd, cvd != "unset", nvidia)
		seen := map[string]bool{}
		for _, d := range got {
			k := d.Key()
			if seen[k] {
				t.Fatalf("%q/%q: %s counted twice", cvd, nvidia, k)
			}
			seen[k] = true
			switch {
			case d.MIG == nil && migOn[d.Index]:
				t.Fatalf("%q/%q: GPU %d is in MIG mode but counted whole", cvd, nvidia, d.Index)
			case d.MIG == nil && !slices.ContainsFunc(r.Devices, func(p Device) bool { return p.UUID == d.UUID && p.Index == d.Index }):
				t.Fatalf("%q/%q: %+v is not a reported GPU", cvd, nvidia, d)
			case d.MIG != nil && !slices.ContainsFunc(r.MIGDevices, func(m Device) bool { return m.MIG.UUID == d.MIG.UUID }):
				t.Fatalf("%q/%q: %+v is not a reported MIG device", cvd, nvidia, d)
			}
		}
	})
}
