package gpu

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func intervalJSON(t *testing.T, s []GPUInterval) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSamplerIntervals(t *testing.T) {
	// Two lines, a pause the test ends, two more (one with memory only):
	// each TakeInterval covers the lines since the previous one.
	gate := filepath.Join(t.TempDir(), "go")
	body := lines([2]string{"10", "1"}, [2]string{"35", "2"}) +
		"while [ ! -e '" + gate + "' ]; do sleep 0.01; done\n" +
		lines([2]string{"90", "3"}, [2]string{"-", "4"}) +
		"printf 'v2 " + uuid0 + "=0/5/- " + uuid1 + "=100/5/- " + uuid0 + "=50/5/-\\n'\n" + // uuid0 named twice: counted once
		"exec cat > /dev/null"
	f := newSamplerFixture(t, body)
	s := StartSampler(context.Background(), f.opt)
	waitLines(t, s, 2)
	want := `[{"uuid":"` + uuid0 + `","samples":2,"util_mean":22.5},{"uuid":"` + uuid1 + `","samples":0,"util_mean":null}]`
	if j := intervalJSON(t, s.TakeInterval()); j != want {
		t.Errorf("first interval %s\nwant %s", j, want)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitLines(t, s, 5)
	// 90, then a reading without utilisation (not a utilisation sample),
	// then 0; uuid1's one reading is 100.
	want = `[{"uuid":"` + uuid0 + `","samples":2,"util_mean":45},{"uuid":"` + uuid1 + `","samples":1,"util_mean":100}]`
	if j := intervalJSON(t, s.TakeInterval()); j != want {
		t.Errorf("second interval %s\nwant %s", j, want)
	}
	want = `[{"uuid":"` + uuid0 + `","samples":0,"util_mean":null},{"uuid":"` + uuid1 + `","samples":0,"util_mean":null}]`
	if j := intervalJSON(t, s.TakeInterval()); j != want {
		t.Errorf("an interval without lines %s\nwant %s", j, want)
	}
	// The whole run's summary is not touched by the intervals.
	if sum := s.Stop(); sum[0].Samples != 5 || *sum[0].UtilMean != 135.0/4 {
		t.Errorf("summary %s", summaryJSON(t, sum))
	}
}

func TestSamplerIntervalWithoutSampling(t *testing.T) {
	s := StartSampler(context.Background(), SamplerOptions{GPUs: []Device{{UUID: uuid0, Share: 1}}}) // no interval: nothing starts
	want := `[{"uuid":"` + uuid0 + `","samples":0,"util_mean":null}]`
	if j := intervalJSON(t, s.TakeInterval()); j != want {
		t.Errorf("interval %s, want %s", j, want)
	}
}

func TestSamplerIntervalMIG(t *testing.T) {
	// A MIG entry of the interval names its parent and its MIG UUID.
	mig := Device{UUID: uuid0, Share: 1.0 / 7, MIG: &MIG{UUID: mig0, Slices: 1, TotalSlices: 7}}
	f := newSamplerFixture(t, "printf 'v2 "+mig0+"=-/-/5 "+uuid1+"=20/1/5\\n'\nexec cat > /dev/null")
	f.opt.GPUs = []Device{mig, {UUID: uuid1, Share: 1}}
	s := StartSampler(context.Background(), f.opt)
	waitLines(t, s, 1)
	want := `[{"uuid":"` + uuid0 + `","mig_uuid":"` + mig0 + `","samples":0,"util_mean":null},{"uuid":"` + uuid1 + `","samples":1,"util_mean":20}]`
	if j := intervalJSON(t, s.TakeInterval()); j != want {
		t.Errorf("interval %s\nwant %s", j, want)
	}
	s.Stop()
}
