package gpu

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const (
	mig0  = "MIG-a1b2c300-0700-4b1c-9d2e-0f1a2b3c4d00"
	uuid0 = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
	uuid1 = "GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01"
)

func TestParseSample(t *testing.T) {
	tests := []struct {
		line string
		want Sample
		err  string // part of the error; "" when it parses
	}{
		{line: "v2 " + uuid0 + "=37/1073741824/81234567",
			want: Sample{{UUID: uuid0, Util: 37, HasUtil: true, MemoryUsed: 1 << 30, HasMemory: true, Energy: 81234567, HasEnergy: true}}},
		{line: "v2 " + uuid0 + "=0/0/0 " + uuid1 + "=100/18446744073709551615/18446744073709551615",
			want: Sample{
				{UUID: uuid0, Util: 0, HasUtil: true, MemoryUsed: 0, HasMemory: true, HasEnergy: true},
				{UUID: uuid1, Util: 100, HasUtil: true, MemoryUsed: 1<<64 - 1, HasMemory: true, Energy: 1<<64 - 1, HasEnergy: true},
			}},
		{line: "v2 " + uuid0 + "=-/-/-", want: Sample{{UUID: uuid0}}},
		{line: "v2 " + uuid0 + "=5/-/-", want: Sample{{UUID: uuid0, Util: 5, HasUtil: true}}},
		{line: "v2 " + uuid0 + "=-/7/-", want: Sample{{UUID: uuid0, MemoryUsed: 7, HasMemory: true}}},
		{line: "v2 " + mig0 + "=-/7/9", want: Sample{{UUID: mig0, MemoryUsed: 7, HasMemory: true, Energy: 9, HasEnergy: true}}},
		{line: "v2", err: "no GPU"},
		{line: "v2 ", err: "no GPU"},
		{line: "v2  " + uuid0 + "=1/1/1", err: "field 1: no '='"},
		{line: "v2 " + uuid0 + "=1/1/1 ", err: "field 2: no '='"},
		{line: "v2 " + uuid0 + "=1/1/1\r", err: "energy"},
		{line: "v2 " + uuid0 + "=101/1/1", err: "utilisation \"101\": larger than 100"},
		{line: "v2 " + uuid0 + "=-1/1/1", err: "utilisation \"-1\": not a decimal"},
		{line: "v2 " + uuid0 + "=+1/1/1", err: "not a decimal"},
		{line: "v2 " + uuid0 + "=07/1/1", err: "leading zero"},
		{line: "v2 " + uuid0 + "=/1/1", err: "empty number"},
		{line: "v2 " + uuid0 + "=1/18446744073709551616/1", err: "used memory"},
		{line: "v2 " + uuid0 + "=1/1/18446744073709551616", err: "energy"},
		{line: "v2 " + uuid0 + "=1/1.5/1", err: "not a decimal"},
		{line: "v2 " + uuid0 + "=1/1/01", err: "energy \"01\": leading zero"},
		{line: "v2 " + uuid0 + "=1/1/", err: "energy \"\": empty number"},
		{line: "v2 " + uuid0 + "=1", err: "no '/'"},
		{line: "v2 " + uuid0 + "=1/1", err: "no '/' between memory and energy"},
		{line: "v2 =1/1/1", err: "empty UUID"},
		{line: "v2 GPU-\x00=1/1/1", err: "byte 0x00"},
		{line: "v2 GPU-é=1/1/1", err: "UUID has byte"},
		{line: "v2 " + strings.Repeat("G", 97) + "=1/1/1", err: "longer than 96"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := ParseSample(tt.line)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseSample(%q) = %v, %v; want an error with %q", tt.line, got, err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseSample(%q) = %+v, %v; want %+v", tt.line, got, err, tt.want)
			}
			if text := string(got.AppendText(nil)); text != tt.line+"\n" {
				t.Errorf("AppendText = %q, want %q", text, tt.line+"\n")
			}
		})
	}
	for _, old := range []string{"v1 x=1/1", "v3 x=1/1/1"} {
		if _, err := ParseSample(old); !errors.Is(err, ErrSampleVersion) {
			t.Errorf("%q: %v, want ErrSampleVersion", old, err)
		}
	}
}

// TestParseSampleLaterValues: a newer probe may append values to a field;
// they are ignored, the known ones read.
func TestParseSampleLaterValues(t *testing.T) {
	got, err := ParseSample("v2 " + uuid0 + "=5/6/7/8/whatever " + uuid1 + "=-/-/-/")
	want := Sample{{UUID: uuid0, Util: 5, HasUtil: true, MemoryUsed: 6, HasMemory: true, Energy: 7, HasEnergy: true}, {UUID: uuid1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSample = %+v, %v; want %+v", got, err, want)
	}
}

// FuzzParseSample asserts that the sample line parser never panics, that
// what it accepts is within the format's bounds, and that a line it accepts
// has exactly one spelling: written back, it is the same bytes (less the
// values after the known ones, which a reader ignores). The seed
// corpus is in testdata/fuzz/FuzzParseSample.
func FuzzParseSample(f *testing.F) {
	f.Add("v2 " + uuid0 + "=37/1073741824/5 " + uuid1 + "=-/-/-")
	f.Fuzz(func(t *testing.T, line string) {
		s, err := ParseSample(line)
		if err != nil {
			if s != nil {
				t.Fatalf("a sample %+v with the error %v", s, err)
			}
			return
		}
		if len(s) == 0 {
			t.Fatalf("%q parsed to no reading", line)
		}
		for _, r := range s {
			if r.HasUtil && r.Util > 100 || !r.HasUtil && r.Util != 0 || !r.HasMemory && r.MemoryUsed != 0 || !r.HasEnergy && r.Energy != 0 {
				t.Fatalf("%q: reading %+v out of bounds", line, r)
			}
			if checkUUID(r.UUID) != nil || strings.ContainsAny(r.UUID, " =/\n") {
				t.Fatalf("%q: UUID %q", line, r.UUID)
			}
		}
		back := string(s.AppendText(nil))
		if again, err := ParseSample(strings.TrimSuffix(back, "\n")); err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("%q written back as %q, which reads as %+v, %v", line, back, again, err)
		}
		if strings.Count(line, "/") == 2*len(s) && back != line+"\n" {
			t.Fatalf("%q written back as %q", line, back)
		}
	})
}
