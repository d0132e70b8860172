package nodereport

import "time"

// NextEnd is the first wall-clock multiple of interval after t: where the
// interval t is in ends.
func NextEnd(t time.Time, interval time.Duration) time.Time {
	return t.Truncate(interval).Add(interval)
}

// IsEnd reports whether t is exactly an interval's end.
func IsEnd(t time.Time, interval time.Duration) bool {
	return t.Equal(t.Truncate(interval))
}

// FirstStart is where the first report after a start begins: at the last
// spooled or sent report's time when that is within one interval of now
// (a restart leaves no hole it could have covered), else now (whole
// seconds).
func FirstStart(now time.Time, interval time.Duration, last time.Time, haveLast bool) time.Time {
	now = now.Truncate(time.Second)
	if haveLast && !last.After(now) && now.Sub(last) <= interval {
		return last
	}
	return now
}
