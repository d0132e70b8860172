package hami

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file string
		want [][]Device
	}{
		{"two-containers.txt", [][]Device{
			{{UUID: "GPU-11111111-2222-3333-4444-555555555555", Type: "NVIDIA", MemoryMiB: 20000, Cores: 30}},
			{{UUID: "GPU-11111111-2222-3333-4444-555555555555", Type: "NVIDIA", MemoryMiB: 10000, Cores: 0},
				{UUID: "GPU-66666666-7777-8888-9999-000000000000", Type: "NVIDIA", MemoryMiB: 40960, Cores: 50}}}},
		{"sidecar-first.txt", [][]Device{nil, {{UUID: "GPU-aaaaaaaa-0000-4000-8000-000000000001", Type: "NVIDIA", MemoryMiB: 8192, Cores: 25}}}},
		{"single.txt", [][]Device{{{UUID: "GPU-aaaaaaaa-0000-4000-8000-000000000001", Type: "NVIDIA", MemoryMiB: 3000}}}},
	}
	for _, tc := range tests {
		b, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(string(b))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.file, got, tc.want)
		}
	}
}

func TestParseHostile(t *testing.T) {
	for _, v := range []string{
		"GPU-a,NVIDIA,100:;",     // three fields
		"GPU-a,NVIDIA,-5,10:;",   // negative memory
		"GPU-a,NVIDIA,100,101:;", // cores over 100
		"GPU-a,NVIDIA,100,ten:;", // not a number
		",NVIDIA,100,10:;",       // no UUID
		"GPU-a,NVIDIA,1e9,10:;",  // not an integer
	} {
		if _, err := Parse(v); err == nil || !strings.Contains(err.Error(), Annotation) {
			t.Errorf("Parse(%q): %v, want an error naming the annotation", v, err)
		}
	}
	if got, err := Parse(""); err != nil || got != nil {
		t.Errorf("Parse(\"\"): %v %v", got, err)
	}
}

func TestShare(t *testing.T) {
	const h200 = 150754820096 // bytes
	tests := []struct {
		d    Device
		want float64
	}{
		{Device{Cores: 30, MemoryMiB: 20000}, 0.3},
		{Device{Cores: 0, MemoryMiB: 71890}, float64(71890<<20) / h200}, // about 0.5
		{Device{Cores: 0, MemoryMiB: 1 << 30}, 1},                       // more than the GPU: capped
		{Device{}, 0},
	}
	for _, tc := range tests {
		if got := tc.d.Share(h200); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.d, got, tc.want)
		}
	}
}
