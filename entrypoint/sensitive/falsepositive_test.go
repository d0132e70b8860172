package sensitive

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// corpusSize is how many names each generator makes. The generators are
// seeded, so a failure names a value that reproduces.
const corpusSize = 10000

// benign generates realistic names that are not sensitive: the labels a
// training platform writes every day. None may be flagged.
var benign = []struct {
	name string
	gen  func(r *rand.Rand) string
}{
	{"run-<unix-ms>", func(r *rand.Rand) string { return fmt.Sprintf("run-%d", someTime(r).UnixMilli()) }},
	{"job-<unix-ns>", func(r *rand.Rand) string { return fmt.Sprintf("job-%d", someTime(r).UnixNano()) }},
	{"<unix-us>", func(r *rand.Rand) string { return fmt.Sprint(someTime(r).UnixMicro()) }},
	{"<unix-s>_<unix-ms>", func(r *rand.Rand) string {
		t := someTime(r)
		return fmt.Sprintf("%d_%d", t.Unix(), t.UnixMilli())
	}},
	{"ckpt-<yyyymmddhhmmss>", func(r *rand.Rand) string { return "ckpt-" + someTime(r).Format("20060102150405") }},
	{"<yyyymmdd>-<hhmmss>-<6 digits>", func(r *rand.Rand) string {
		return someTime(r).Format("20060102-150405") + fmt.Sprintf("-%06d", r.IntN(1000000))
	}},
	// '_' and '.' separate digit groups as '-' does (the name rule allows
	// all three, and the card and identity checks treat them alike).
	{"<yyyymmdd>_<hhmmss>_<6 digits>", func(r *rand.Rand) string {
		return someTime(r).Format("20060102_150405") + fmt.Sprintf("_%06d", r.IntN(1000000))
	}},
	{"<yyyymmdd>.<hhmmss>.<6 digits>", func(r *rand.Rand) string {
		return someTime(r).Format("20060102.150405") + fmt.Sprintf(".%06d", r.IntN(1000000))
	}},
	{"<unix-s>.<unix-ms>", func(r *rand.Rand) string {
		t := someTime(r)
		return fmt.Sprintf("%d.%d", t.Unix(), t.UnixMilli())
	}},
	{"<unix-s>.<microseconds>", func(r *rand.Rand) string {
		t := someTime(r)
		return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
	}},
	{"v<major>.<minor>.<patch>", func(r *rand.Rand) string {
		return fmt.Sprintf("v%d.%d.%d", r.IntN(30), r.IntN(100), r.IntN(10000))
	}},
	{"IPv4 address", func(r *rand.Rand) string {
		return fmt.Sprintf("%d.%d.%d.%d", 1+r.IntN(254), r.IntN(256), r.IntN(256), 1+r.IntN(254))
	}},
	{"ckpt_<epoch>_<step>_<unix-s>", func(r *rand.Rand) string {
		return fmt.Sprintf("ckpt_%04d_%06d_%d", r.IntN(1000), r.IntN(1000000), someTime(r).Unix())
	}},
	{"task-<uuid>", func(r *rand.Rand) string { return "task-" + uuid(r) }},
	{"<uuid without dashes>", func(r *rand.Rand) string { return strings.ReplaceAll(uuid(r), "-", "") }},
	{"<sha1>", func(r *rand.Rand) string { return hexHash(r, 20) }},
	{"commit-<sha1>", func(r *rand.Rand) string { return "commit-" + hexHash(r, 20) }},
	{"<sha256>", func(r *rand.Rand) string { return hexHash(r, 32) }},
	{"<short sha>", func(r *rand.Rand) string { return hexHash(r, 20)[:7+r.IntN(6)] }},
	{"<snowflake id>", func(r *rand.Rand) string {
		// Twitter-style: ms since 2010-11-04 << 22 | worker << 12 | sequence,
		// minted from 2020 (1.2e18, 19 digits) to 2035.
		ms := someTime(r).UnixMilli() - 1288834974657
		return fmt.Sprint(ms<<22 | int64(r.IntN(1024))<<12 | int64(r.IntN(4096)))
	}},
	{"pod name", func(r *rand.Rand) string {
		return fmt.Sprintf("trainer-%x-%s", r.Uint32()&0xfffffff, randLower(r, 5))
	}},
	{"k8s job with index", func(r *rand.Rand) string {
		return fmt.Sprintf("paddle-job-%d-worker-%d", r.IntN(100000), r.IntN(64))
	}},
}

// someTime is a moment from 2020 to the end of 2035.
func someTime(r *rand.Rand) time.Time {
	from := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	to := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	return time.Unix(0, from+r.Int64N(to-from))
}

func uuid(r *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func hexHash(r *rand.Rand, n int) string {
	seed := fmt.Sprint(r.Uint64())
	if n == 20 {
		s := sha1.Sum([]byte(seed))
		return hex.EncodeToString(s[:])
	}
	s := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(s[:n])
}

func randLower(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "bcdfghjklmnpqrstvwxz2456789"[r.IntN(27)]
	}
	return string(b)
}

// TestSensitiveFalsePositivesBenign asserts that no generated benign name
// is flagged: 10,000 of each kind, zero false positives.
func TestSensitiveFalsePositivesBenign(t *testing.T) {
	for i, g := range benign {
		t.Run(g.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
			for range corpusSize {
				v := g.gen(r)
				if k, ok := Scan(v); ok {
					t.Fatalf("benign %s %q flagged as %s", g.name, v, k)
				}
			}
		})
	}
}

// TestSensitiveFalsePositivesRandomNumbers measures the rate at which
// uniformly random numbers (the worst case: an arbitrary "ordinary long
// number" that is not a timestamp) are flagged, per length. Card and
// identity checks cannot tell such a number from a real one, so the rate is
// the price of the contract's detectors; the bounds are the expected rates
// with a margin, and docs/security.md quotes the measured figures (run with
// -v to print them).
func TestSensitiveFalsePositivesRandomNumbers(t *testing.T) {
	// Expected: card prefix share at that length x 1/10 (Luhn), plus the
	// identity forms at 15 and 18 digits.
	bound := map[int]float64{13: 0.015, 14: 0.006, 15: 0.025, 16: 0.04, 17: 0.012, 18: 0.012, 19: 0.025}
	const n = 20000
	r := rand.New(rand.NewPCG(7, 7))
	for length := 12; length <= 20; length++ {
		hits := map[Kind]int{}
		total := 0
		for range n {
			d := make([]byte, length)
			d[0] = byte('1' + r.IntN(9))
			for j := 1; j < length; j++ {
				d[j] = byte('0' + r.IntN(10))
			}
			if k, ok := Scan("n-" + string(d)); ok {
				hits[k]++
				total++
			}
		}
		rate := float64(total) / n
		t.Logf("%2d digits: %.2f%% flagged %v", length, 100*rate, hits)
		if rate > bound[length] {
			t.Errorf("%d-digit random numbers flagged at %.2f%%, above the expected %.2f%%", length, 100*rate, 100*bound[length])
		}
	}
}
